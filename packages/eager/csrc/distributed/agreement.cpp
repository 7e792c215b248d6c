#include "agreement.h"

#include <sstream>

namespace openreg::eager::distributed {
namespace {

constexpr size_t kDims = 6;  // shapes of more dimensions compare by their first six and numel
enum Field { kType, kReduceOp, kDtype, kNdim, kNumel, kSizes, kLength = kSizes + kDims };

std::string describe(const int64_t* s) {
  std::ostringstream out;
  out << c10d::opTypeToString(static_cast<c10d::OpType>(s[kType]));
  static const char* const reductions[] = {"SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "PREMUL_SUM"};
  if (s[kReduceOp] >= 0 && s[kReduceOp] < 9) out << " (" << reductions[s[kReduceOp]] << ")";
  if (s[kDtype] >= 0) {
    out << " of a " << c10::getDtypeNames(static_cast<c10::ScalarType>(s[kDtype])).first << " tensor of shape [";
    for (int64_t d = 0; d < std::min<int64_t>(s[kNdim], kDims); ++d) out << (d ? ", " : "") << s[kSizes + d];
    out << (s[kNdim] > static_cast<int64_t>(kDims) ? ", ...]" : "]");
  }
  return out.str();
}

}  // namespace

std::vector<int64_t> signature(c10d::OpType type, int reduce_op, const at::Tensor* t) {
  std::vector<int64_t> s(kLength, -1);
  s[kType] = static_cast<int64_t>(type);
  s[kReduceOp] = reduce_op;
  if (t != nullptr) {
    s[kDtype] = static_cast<int64_t>(t->scalar_type());
    s[kNdim] = t->dim();
    s[kNumel] = t->numel();
    for (int64_t d = 0; d < std::min<int64_t>(t->dim(), kDims); ++d) s[kSizes + d] = t->size(d);
  }
  return s;
}

void check_agreement(c10d::Backend& gloo, const char* name, const std::vector<int64_t>& mine) {
  // One all_reduce of two numbers (MAX of a hash of the signature and of its
  // negation) says whether all ranks agree: gloo's small all_reduce costs
  // per element. Only a mismatch pays for the all_gather that says who
  // passed what.
  uint64_t hash = 14695981039346656037ull;  // FNV-1a
  for (int64_t v : mine) hash = (hash ^ static_cast<uint64_t>(v)) * 1099511628211ull;
  auto h = static_cast<int64_t>(hash >> 2);  // its negation fits too
  std::vector<at::Tensor> bounds{at::tensor({h, -h}, at::kLong)};
  c10d::AllreduceOptions max;
  max.reduceOp = c10d::ReduceOp::MAX;
  gloo.allreduce(bounds, max)->wait();
  const int64_t* b = bounds[0].const_data_ptr<int64_t>();
  if (b[0] == -b[1]) return;

  at::Tensor local = at::tensor(mine, at::kLong);
  int size = gloo.getSize();
  std::vector<at::Tensor> in{local};
  std::vector<std::vector<at::Tensor>> out{{}};
  for (int r = 0; r < size; ++r) out[0].push_back(at::empty_like(local));
  gloo.allgather(out, in, c10d::AllgatherOptions())->wait();
  std::ostringstream ranks;
  for (int r = 0; r < size; ++r) ranks << "\n  rank " << r << ": " << describe(out[0][r].const_data_ptr<int64_t>());
  TORCH_CHECK_VALUE(false, name, " on rank ", gloo.getRank(),
                    ": the ranks' calls do not match, so gloo cannot run it:", ranks.str(),
                    "\nEvery rank must make the same collective calls, in the same order, with tensors of ",
                    "the same dtype and shape.");
}

}  // namespace openreg::eager::distributed
