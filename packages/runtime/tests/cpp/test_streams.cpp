// Streams: order, asynchrony, waits and failures.
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "check.h"
#include "openreg/core/error.h"
#include "openreg/core/stream.h"

using namespace openreg;

TEST(tasks_run_in_launch_order) {
  Stream& s = get_stream(0, 0);
  std::vector<int> order;  // written by the worker only, read after the synchronize
  for (int i = 0; i < 100; ++i) s.launch("append", [&order, i] { order.push_back(i); });
  s.synchronize();
  CHECK(order.size() == 100);
  for (int i = 0; i < 100; ++i) CHECK(order[i] == i);
  CHECK(s.query());
}

TEST(launch_returns_before_the_task_runs) {
  Stream& s = get_stream(0, 1);
  Gate gate;
  const uint64_t blocked = s.launch("blocked", gate.waiter());
  const uint64_t next = s.launch("next", [] {});
  CHECK(next == blocked + 1);
  CHECK(s.last() == next);
  sleep_ms(20);
  CHECK(!s.query());
  CHECK(!s.reached(blocked));
  gate.open();
  s.synchronize();
  CHECK(s.reached(next));
  CHECK(s.query());
}

TEST(wait_for_returns_once_its_task_has_run) {
  Stream& s = get_stream(0, 2);
  Gate gate;
  const uint64_t first = s.launch("first", [] {});
  const uint64_t blocked = s.launch("blocked", gate.waiter());
  s.wait_for(first);
  CHECK(s.reached(first));
  CHECK(!s.reached(blocked));
  gate.open();
  s.wait_for(blocked);
  CHECK(s.query());
}

TEST(a_failure_is_raised_at_the_next_synchronize_with_its_cause) {
  Stream& s = get_stream(0, 3);
  s.launch("boom", [] { throw std::out_of_range("index 7 is out of bounds"); });
  bool raised = false;
  try {
    s.synchronize();
  } catch (const AsyncError& e) {
    raised = true;
    CHECK(std::strstr(e.what(), "'boom' failed asynchronously on openreg:0 (stream 3)") != nullptr);
    CHECK(std::strstr(e.what(), "index 7 is out of bounds") != nullptr);
    CHECK_THROWS(std::rethrow_exception(e.cause), std::out_of_range);
  }
  CHECK(raised);
  s.synchronize();  // raised once, then cleared
}

TEST(synchronize_device_waits_for_every_stream_and_raises) {
  Gate gate;
  std::atomic<bool> ran{false};
  get_stream(0, 4).launch("blocked", gate.waiter());
  get_stream(0, 4).launch("mark", [&ran] { ran = true; });
  get_stream(0, 5).launch("boom", [] { throw std::runtime_error("bad value"); });
  std::thread opener([gate] {
    sleep_ms(20);
    gate.open();
  });
  CHECK_THROWS(synchronize_device(0), AsyncError);
  opener.join();
  CHECK(ran);
  synchronize_device(-1);
}

TEST(a_task_knows_it_runs_on_a_worker) {
  std::atomic<bool> inside{false};
  Stream& s = get_stream(0, 0);
  s.launch("probe", [&inside] { inside = in_task(); });
  s.synchronize();
  CHECK(inside);
  CHECK(!in_task());
}

TEST(current_streams_are_per_thread_and_checked) {
  CHECK(current_stream(0).id() == 0);
  const int pooled = next_pool_stream(0);
  CHECK(pooled >= 1 && pooled <= kPoolSize && stream_priority(pooled) == 0);
  for (int priority = 0; priority > -kPriorities; --priority) {
    CHECK(stream_priority(next_pool_stream(0, priority)) == priority);
  }
  CHECK(stream_priority(next_pool_stream(0, -kPriorities)) == 1 - kPriorities);  // the nearest, as CUDA's
  CHECK(stream_priority(next_pool_stream(0, 3)) == 0);
  CHECK(stream_priority(0) == 0 && stream_priority(reserved_stream(0)) == 0);
  set_current_stream(0, pooled);
  CHECK(current_stream(0).id() == pooled);
  int other = -1;
  std::thread([&other] { other = current_stream(0).id(); }).join();
  CHECK(other == 0);
  set_current_stream(0, 0);
  CHECK(get_stream(0, reserved_stream(kReservedStreams - 1)).id() == kStreams - 1);  // reserved, never pooled
  CHECK_THROWS(set_current_stream(0, kStreams), Error);
  CHECK_THROWS(get_stream(64, 0), Error);
  CHECK(&get_stream(1, 2) == &get_stream(1, 2));
  CHECK(get_stream(1, 2).device() == 1 && get_stream(1, 2).id() == 2);
}

TEST(in_order_holds_the_stream_for_the_calling_thread) {
  Stream& s = get_stream(0, 7);
  Gate gate;
  std::atomic<int> step{0};
  s.launch("blocked", gate.waiter());
  s.launch("first", [&step] { step = 1; });
  std::thread opener([gate] {
    sleep_ms(20);
    gate.open();
  });
  {
    Stream::InOrder held(s);
    CHECK(step == 1);  // what was queued has run
    CHECK(in_task());  // what this thread launches now runs in place
    std::thread([&s, &step] { s.launch("later", [&step] { step = 3; }); }).join();
    sleep_ms(20);
    CHECK(step == 1);  // launched elsewhere meanwhile: waits for the holder
    step = 2;
  }
  CHECK(!in_task());
  s.synchronize();
  opener.join();
  CHECK(step == 3);
}

TEST(in_order_if_idle_holds_only_an_idle_stream_a_few_times_per_wait) {
  Stream& s = get_stream(0, 10);
  s.synchronize();
  {
    Stream::InOrder held(s, "short op", Stream::InOrder::IfIdle{});
    CHECK(held);
    CHECK(in_task());  // held as by InOrder: later launches wait for it
  }
  CHECK(!in_task());
  Gate gate;
  s.launch("blocked", gate.waiter());
  {
    Stream::InOrder busy(s, "short op", Stream::InOrder::IfIdle{});
    CHECK(!busy);  // returned at once, waiting for nothing
    CHECK(!in_task());
    CHECK(!s.query());
  }
  gate.open();
  s.synchronize();
  // The allowance, then none until the thread waits again.
  for (int i = 0; i < Stream::InOrder::kShortRunsPerWait; ++i) {
    CHECK(Stream::InOrder(s, "short op", Stream::InOrder::IfIdle{}));
  }
  CHECK(!Stream::InOrder(s, "short op", Stream::InOrder::IfIdle{}));
  CHECK(s.query());
  s.synchronize();
  CHECK(Stream::InOrder(s, "short op", Stream::InOrder::IfIdle{}));
  {
    Stream::InOrder read(s);
  }  // a read in stream order counts as a wait
  for (int i = 0; i < Stream::InOrder::kShortRunsPerWait; ++i) {
    CHECK(Stream::InOrder(s, "short op", Stream::InOrder::IfIdle{}));
  }
  // Another thread has an allowance of its own.
  std::thread([&s] { CHECK(Stream::InOrder(s, "short op", Stream::InOrder::IfIdle{})); }).join();
}

TEST(a_task_nobody_waits_for_runs_whether_the_worker_dozes_or_sleeps) {
  Stream& s = get_stream(0, 9);
  for (int idle_ms : {0, 1, 50}) {  // launched at once, while the worker dozes, once it sleeps
    s.synchronize();
    sleep_ms(idle_ms);
    std::atomic<bool> ran{false};
    s.launch("unawaited", [&ran] { ran = true; });
    for (int i = 0; i < 200 && !ran; ++i) sleep_ms(1);  // not a wait on the stream: no host thread runs it
    CHECK(ran);
  }
}

TEST(a_waiting_host_runs_tasks_in_order_with_the_worker) {
  Stream& s = get_stream(0, 8);
  std::vector<int> order;  // written by whichever thread holds the turn
  for (int round = 0; round < 200; ++round) {
    for (int i = 0; i < 5; ++i) s.launch("append", [&order, i] { order.push_back(i); });
    s.synchronize();
  }
  CHECK(order.size() == 1000);
  for (size_t i = 0; i < order.size(); ++i) CHECK(order[i] == static_cast<int>(i % 5));
}

int main() { return run_tests(); }
