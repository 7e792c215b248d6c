// Graphs in the core: capture records without running, replay runs in order,
// waits on a capturing stream raise, pools keep their blocks for replays.
#include <string>
#include <vector>

#include "check.h"
#include "openreg/core/error.h"
#include "openreg/core/graph.h"
#include "openreg/core/memory.h"
#include "openreg/core/stream.h"

using namespace openreg;

TEST(capture_records_and_replay_runs_in_order) {
  Stream& s = get_stream(0, 3);
  std::vector<int> order;  // written by the stream's tasks, read after synchronize
  Graph g;
  g.capture_begin(s, 0, CaptureMode::Global);
  CHECK(is_capturing(s));
  for (int i = 0; i < 3; ++i) CHECK(s.launch("append", [&order, i] { order.push_back(i); }) == 0);
  g.capture_end();
  CHECK(!is_capturing(s));
  s.synchronize();
  CHECK(order.empty());  // nothing ran at capture
  CHECK((g.listing() == std::vector<std::string>{"append", "append", "append"}));
  g.replay(s);
  g.replay(s);
  s.synchronize();
  CHECK((order == std::vector<int>{0, 1, 2, 0, 1, 2}));
}

TEST(a_wait_on_a_capturing_stream_raises_and_invalidates_the_capture) {
  Stream& s = get_stream(0, 4);
  Graph g;
  g.capture_begin(s, 0, CaptureMode::Relaxed);
  CHECK_THROWS(s.synchronize(), Error);
  get_stream(0, 5).synchronize();  // relaxed: other streams may be waited for
  CHECK_THROWS(g.capture_end(), Error);
  CHECK(!g.captured());
  s.launch("runs", [] {});  // the stream works again
  s.synchronize();
}

TEST(a_global_capture_forbids_waits_on_every_stream) {
  Stream& s = get_stream(0, 6);
  Graph g;
  g.capture_begin(s, 0, CaptureMode::Global);
  CHECK_THROWS(get_stream(0, 7).synchronize(), Error);
  CHECK_THROWS(g.capture_end(), Error);
  get_stream(0, 7).synchronize();
}

TEST(a_pool_keeps_blocks_freed_in_the_capture_from_eager_allocations) {
  Stream& s = get_stream(0, 9);
  DeviceMemory& memory = device_memory(0);
  Graph g;
  g.capture_begin(s, 0, CaptureMode::Global);
  void* temporary = memory.malloc(4096, s.id());
  memory.free(temporary);
  g.capture_end();
  void* eager = memory.malloc(4096, s.id());
  CHECK(eager != temporary);  // replays still write into the temporary
  memory.free(eager);
  memory.empty_cache();  // keeps the temporary: the graph replays into it
  const auto reserved = memory.reserved();
  CHECK(reserved >= 4096);
  g.reset();
  memory.empty_cache();  // now the pool goes back to the host
  CHECK(memory.reserved() == reserved - 4096);
}

int main() { return run_tests(); }
