#pragma once
// The tables of cuda_refuses.cpp and cuda_lacks.cpp list several values in one
// string, space-separated as Python prints them ("prod amax amin").
#include <algorithm>
#include <string_view>

namespace openreg::eager {

inline bool lists(std::string_view words, std::string_view word) {
  for (size_t start = 0; start < words.size();) {
    const size_t end = std::min(words.find(' ', start), words.size());
    if (words.substr(start, end - start) == word) return true;
    start = end + 1;
  }
  return false;
}

}  // namespace openreg::eager
