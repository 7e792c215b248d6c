// Events: record, query, synchronize, elapsed time, and waits across streams.
#include "check.h"
#include "openreg/core/error.h"
#include "openreg/core/stream.h"

using namespace openreg;

TEST(an_unrecorded_event_is_complete) {
  Event e;
  CHECK(!e.recorded());
  CHECK(e.query());
  CHECK(e.device() == -1);
  e.synchronize();
}

TEST(an_event_completes_when_its_stream_reaches_it) {
  Stream& s = get_stream(1, 0);
  Gate gate;
  s.launch("blocked", gate.waiter());
  Event e;
  e.record(s);
  CHECK(e.recorded());
  CHECK(e.device() == 1);
  sleep_ms(20);
  CHECK(!e.query());
  gate.open();
  e.synchronize();
  CHECK(e.query());
}

TEST(recording_again_rearms_the_event) {
  Stream& s = get_stream(0, 1);
  Event e;
  e.record(s);
  e.synchronize();
  Gate gate;
  s.launch("blocked", gate.waiter());
  e.record(s);
  CHECK(!e.query());
  gate.open();
  e.synchronize();
  CHECK(e.query());
}

TEST(elapsed_time_spans_the_work_between_two_timed_events) {
  Stream& s = get_stream(0, 2);
  Event start(true), end(true);
  start.record(s);
  s.launch("sleep", [] { sleep_ms(20); });
  end.record(s);
  end.synchronize();
  CHECK(start.elapsed_ms(end) >= 19.0);
  CHECK(start.elapsed_ms(end) < 10000.0);
}

TEST(elapsed_time_needs_timed_recorded_and_completed_events) {
  Stream& s = get_stream(0, 3);
  Event untimed, start(true), end(true);
  CHECK_THROWS(start.elapsed_ms(end), Error);  // not recorded
  untimed.record(s);
  start.record(s);
  CHECK_THROWS(untimed.elapsed_ms(start), Error);
  Gate gate;
  s.launch("blocked", gate.waiter());
  end.record(s);
  CHECK_THROWS(start.elapsed_ms(end), Error);  // not completed
  gate.open();
  end.synchronize();
  CHECK(start.elapsed_ms(end) >= 0.0);
}

// `consumer` runs nothing queued after waiting on an event of `producer` until `producer` reached the event.
void check_waits_across(Stream& producer, Stream& consumer) {
  Gate gate;
  std::atomic<bool> produced{false}, consumed_after{false};
  producer.launch("blocked", gate.waiter());
  producer.launch("produce", [&produced] { produced = true; });
  Event ready;
  ready.record(producer);
  ready.block(consumer);
  consumer.launch("consume", [&] { consumed_after = produced.load(); });
  sleep_ms(20);
  CHECK(!consumer.query());
  gate.open();
  consumer.synchronize();
  CHECK(consumed_after);
}

TEST(a_stream_waits_for_an_event_of_another_stream) { check_waits_across(get_stream(0, 4), get_stream(0, 5)); }

TEST(a_stream_waits_for_an_event_of_another_device) { check_waits_across(get_stream(1, 1), get_stream(0, 6)); }

TEST(blocking_on_an_unrecorded_event_or_its_own_stream_queues_nothing) {
  Stream& s = get_stream(0, 7);
  const uint64_t before = s.last();
  Event().block(s);
  Gate gate;
  s.launch("blocked", gate.waiter());
  Event e;
  e.record(s);
  e.block(s);
  CHECK(s.last() == before + 2);  // the blocked task and the record only
  gate.open();
  s.synchronize();
}

TEST(an_event_recorded_on_an_idle_stream_is_complete_at_once_and_a_wait_for_it_queues_nothing) {
  Stream &idle = get_stream(0, 8), &other = get_stream(0, 9);
  idle.synchronize();
  other.synchronize();
  const uint64_t idle_before = idle.last(), other_before = other.last();
  Event e(true);
  e.record(idle);
  CHECK(e.recorded());
  CHECK(e.query());
  e.block(other);
  CHECK(other.query());
  CHECK(idle.last() == idle_before && other.last() == other_before);
  Event end(true);
  end.record(idle);
  CHECK(e.elapsed_ms(end) >= 0.0);
}

int main() { return run_tests(); }
