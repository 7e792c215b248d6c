// Task timing for profilers: what a trace records, and that nothing is recorded outside one.
#include <cstring>
#include <vector>

#include "check.h"
#include "openreg/core/stream.h"
#include "openreg/core/trace.h"

using namespace openreg;

namespace {
uint64_t g_next_tag = 0;
uint64_t next_tag() { return ++g_next_tag; }
}  // namespace

TEST(a_trace_records_each_task_with_its_tag_launch_and_run_times) {
  Stream& s = get_stream(0, 1);
  s.launch("before", [] {});
  s.synchronize();
  trace::start(&next_tag);
  const int64_t begin = trace::now();
  s.launch("first", [] { sleep_ms(20); });
  s.launch("second", [] {});
  s.synchronize();
  const std::vector<trace::Record> records = trace::stop();
  CHECK(records.size() == 2);
  CHECK(std::strcmp(records[0].name, "first") == 0 && std::strcmp(records[1].name, "second") == 0);
  CHECK(records[0].tag == 1 && records[1].tag == 2);
  for (const auto& r : records) {
    CHECK(r.device == 0 && r.stream == 1 && r.launch_thread != 0);
    CHECK(begin <= r.launch_begin && r.launch_begin <= r.launch_end && r.launch_begin <= r.start && r.start <= r.end);
  }
  CHECK(records[0].end - records[0].start >= 15'000'000);
  CHECK(records[0].end <= records[1].start);  // in stream order
}

TEST(work_the_host_runs_in_stream_order_is_recorded_without_a_launch) {
  Stream& s = get_stream(0, 2);
  trace::start(&next_tag);
  {
    Stream::InOrder held(s, "held");
  }
  const std::vector<trace::Record> records = trace::stop();
  CHECK(records.size() == 1);
  CHECK(std::strcmp(records[0].name, "held") == 0 && records[0].launch_thread == 0 && records[0].tag != 0);
}

TEST(nothing_is_recorded_outside_a_trace) {
  Stream& s = get_stream(0, 3);
  trace::start(&next_tag);
  trace::stop();
  s.launch("untraced", [] {});
  s.synchronize();
  trace::start(&next_tag);
  CHECK(trace::stop().empty());
  CHECK(!trace::on());
}

int main() { return run_tests(); }
