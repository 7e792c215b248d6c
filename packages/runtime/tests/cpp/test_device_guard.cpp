// DeviceGuard: makes a device current for a scope and restores the previous one.
#include <cstdlib>
#include <stdexcept>

#include "check.h"
#include "openreg/core/device.h"
#include "openreg/core/error.h"

using namespace openreg;

TEST(the_guard_sets_and_restores_the_current_device) {
  CHECK(current_device() == 0);
  {
    DeviceGuard outer(1);
    CHECK(current_device() == 1);
    CHECK(outer.original_device() == 0);
    {
      DeviceGuard inner(0);
      CHECK(current_device() == 0);
      CHECK(inner.original_device() == 1);
    }
    CHECK(current_device() == 1);
  }
  CHECK(current_device() == 0);
}

TEST(the_guard_restores_the_device_when_an_exception_leaves_its_scope) {
  try {
    DeviceGuard guard(1);
    throw std::runtime_error("leaving");
  } catch (const std::runtime_error&) {
  }
  CHECK(current_device() == 0);
}

TEST(a_guard_for_a_missing_device_throws_and_changes_nothing) {
  set_device(1);
  CHECK_THROWS(DeviceGuard guard(2), Error);
  CHECK_THROWS(DeviceGuard guard(-1), Error);
  CHECK(current_device() == 1);
  set_device(0);
}

TEST(the_current_device_is_per_thread) {
  DeviceGuard guard(1);
  int seen = -1;
  std::thread([&seen] { seen = current_device(); }).join();
  CHECK(seen == 0);
  CHECK(current_device() == 1);
}

int main() {
  setenv("OPENREG_DEVICE_COUNT", "2", 1);
  return run_tests();
}
