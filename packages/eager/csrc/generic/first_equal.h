#pragma once
#include <c10/util/SmallVector.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <utility>

namespace openreg::eager {

// For each i in [0, n): the smallest j whose key equals key(i) (i itself when
// none before it has). Sorted, not searched pairwise, as list arguments
// (torch.cat, _foreach_*) bring thousands of tensors; std::sort with the index
// as tie-break, as std::stable_sort allocates at every launch.
template <typename KeyOf>
c10::SmallVector<int32_t, 8> first_equal(size_t n, KeyOf key) {
  c10::SmallVector<int32_t, 8> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int32_t a, int32_t b) { return std::make_pair(key(a), a) < std::make_pair(key(b), b); });
  c10::SmallVector<int32_t, 8> first(n);
  for (size_t k = 0; k < n; ++k) {
    const bool repeat = k > 0 && key(order[k]) == key(order[k - 1]);
    first[order[k]] = repeat ? first[order[k - 1]] : order[k];
  }
  return first;
}

}  // namespace openreg::eager
