// Half-precision FFTs, as CUDA computes them. torch's FFT front ends
// (`torch.fft.*`, CompositeImplicitAutograd) accept a float16 signal only on
// CUDA (and, from torch 2.14, promote bfloat16 to float32 there); on any other
// device they refuse it before a kernel runs. For such an input openreg first
// runs the front end on meta tensors, which take CUDA's branch, so that what
// CUDA refuses is refused with its error; then it computes in float32 and
// rounds the result to the dtype CUDA returns. cuFFT computes float16 and
// complex32 signals only where every transformed size is a power of two: the
// FFT kernels check that for their own dtype, and the front end for the FFT
// kernels it calls widened, before it calls them, so that a graph traced
// through it (torch.compile) refuses as well.
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <string>
#include <vector>

#include "../generic/kernel.h"

namespace openreg::eager {
namespace {

bool is_half(at::ScalarType t) { return t == at::kHalf || t == at::kComplexHalf; }

void check_half_signal(c10::IntArrayRef signal) {
  for (const int64_t n : signal) {
    TORCH_CHECK((n & (n - 1)) == 0,
                "cuFFT only supports dimensions whose sizes are powers of two when computing in half precision, but "
                "got a signal size of",
                signal);
  }
}

// _fft_r2c, _fft_c2c, _fft_c2r (and their out=): the signal is the transformed
// dims of the input, with the real output's length last for c2r. An input of
// the wrong kind (complex for r2c, real for the others) gets the kernel's
// dtype error first, as from cuFFT's kernels.
void fft_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const at::Tensor& self = (*stack)[0].toTensor();
  const bool takes_real = op.schema().name() == "aten::_fft_r2c";
  if (is_half(self.scalar_type()) && self.is_complex() != takes_real) {
    std::vector<int64_t> signal;
    for (const int64_t d : (*stack)[1].toDimVector()) {
      if (d < -self.dim() || d >= self.dim()) return generic_kernel(op, stack);  // the kernel's own error
      signal.push_back(self.size(d));
    }
    if (op.schema().name() == "aten::_fft_c2r" && !signal.empty()) signal.back() = (*stack)[3].toSymInt().expect_int();
    check_half_signal(signal);
  }
  generic_kernel(op, stack);
}

// The signals of the FFT kernels a front end calls, in its order (after its
// meta run, so its arguments are valid): the transformed dims' sizes, `n` or
// `s` where given, a real output's last length 2 * (m - 1) by default.
// hfftn and ihfftn transform their last dim apart from the others. Sizes of a
// traced graph are specialised: cuFFT's rule needs them.
std::vector<std::vector<int64_t>> front_end_signals(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  const c10::FunctionSchema& schema = op.schema();
  const at::Tensor& self = stack[0].toTensor();
  const auto arg = [&](const char* name) { return stack[*schema.argumentIndexWithName(name)]; };
  std::vector<int64_t> dims;
  std::vector<c10::SymInt> given;
  if (schema.argumentIndexWithName("n")) {
    dims.push_back(arg("dim").toInt());
    if (!arg("n").isNone()) given.push_back(arg("n").toSymInt());
  } else {
    if (!arg("s").isNone()) given = arg("s").toSymIntVector();
    if (!arg("dim").isNone()) {
      const at::DimVector d = arg("dim").toDimVector();
      dims.assign(d.begin(), d.end());
    } else {
      const int64_t count = given.empty() ? self.dim() : static_cast<int64_t>(given.size());
      for (int64_t d = self.dim() - count; d < self.dim(); ++d) dims.push_back(d);
    }
  }
  if (dims.empty()) return {};
  const std::string name = schema.name();
  const bool hermitian = name.find("hfft") != std::string::npos;  // hfft* and ihfft*
  const bool ihfft = name.find("ihfft") != std::string::npos;
  const bool real_output = !ihfft && (hermitian || name.find("irfft") != std::string::npos);
  std::vector<int64_t> signal;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i < given.size()) {
      signal.push_back(given[i].guard_int(__FILE__, __LINE__));
      continue;
    }
    const int64_t m = self.sym_size(c10::maybe_wrap_dim(dims[i], self.dim())).guard_int(__FILE__, __LINE__);
    signal.push_back(real_output && i + 1 == dims.size() ? 2 * (m - 1) : m);
  }
  if (!hermitian || signal.size() == 1) return {signal};
  std::vector<int64_t> rest(signal.begin(), signal.end() - 1);
  std::vector<int64_t> last{signal.back()};
  return ihfft ? std::vector{last, rest} : std::vector{rest, last};
}

at::Tensor meta_twin(const at::Tensor& t, bool empty) {
  if (empty) return at::empty({0}, t.options().device(at::kMeta));
  return at::empty_strided(t.sizes(), t.strides(), t.options().device(at::kMeta));
}

void composite(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  op.callBoxedForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd, *stack);
}

// What CUDA returns for a float16 input is float16 / complex32; a bfloat16
// one it computes as float32.
at::ScalarType cuda_result(at::ScalarType input, bool complex) {
  if (input == at::kHalf) return complex ? at::kComplexHalf : at::kHalf;
  return complex ? at::kComplexFloat : at::kFloat;
}

// torch.fft.* (and out=), at openreg's autograd key and, for inference mode,
// its backend key: every input but a real float16 or bfloat16 one takes the
// front end as it is.
void fft_front_end(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const at::Tensor self = (*stack)[0].toTensor();
  if (self.scalar_type() != at::kHalf && self.scalar_type() != at::kBFloat16) return composite(op, stack);
  const bool has_out = op.schema().arguments().back().is_out();
  // Its checks and errors, as CUDA's. The out= twin is empty, so that only the real call warns of a resize.
  torch::jit::Stack meta = *stack;
  for (size_t i = 0; i < meta.size(); ++i) {
    if (meta[i].isTensor()) meta[i] = meta_twin(meta[i].toTensor(), has_out && i + 1 == meta.size());
  }
  op.callBoxed(meta);

  if (self.scalar_type() == at::kHalf) {
    for (const std::vector<int64_t>& signal : front_end_signals(op, *stack)) check_half_signal(signal);
  }
  (*stack)[0] = self.to(at::kFloat);
  if (!has_out) {
    composite(op, stack);
    const at::Tensor result = stack->back().toTensor();
    stack->back() = result.to(cuda_result(self.scalar_type(), result.is_complex()));
    return;
  }
  const at::Tensor out = stack->back().toTensor();
  const bool complex = out.is_complex();
  stack->back() = at::empty({0}, out.options().dtype(complex ? at::kComplexFloat : at::kFloat));
  composite(op, stack);
  const at::Tensor result = stack->back().toTensor().to(cuda_result(self.scalar_type(), complex));
  at::native::resize_output(out, result.sizes());
  out.copy_(result);
  stack->back() = out;
}

void register_front_ends(torch::Library& m) {
  for (const char* kind : {"fft", "ifft", "rfft", "irfft", "hfft", "ihfft"}) {
    for (const char* dims : {"", "2", "n"}) {
      const std::string name = std::string("fft_") + kind + dims;
      m.impl(name.c_str(), torch::CppFunction::makeFromBoxedFunction<&fft_front_end>());
      m.impl((name + ".out").c_str(), torch::CppFunction::makeFromBoxedFunction<&fft_front_end>());
    }
  }
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) { register_front_ends(m); }

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_front_ends(m);
  for (const char* name : {"_fft_r2c", "_fft_c2c", "_fft_c2r"}) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&fft_kernel>());
    m.impl((std::string(name) + ".out").c_str(), torch::CppFunction::makeFromBoxedFunction<&fft_kernel>());
  }
}

}  // namespace openreg::eager
