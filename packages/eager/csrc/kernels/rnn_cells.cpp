// PyTorch sends LSTM and GRU cells on accelerators to fused ops that only CUDA
// implements (_thnn_fused_*). On openreg they are composed of ATen ops, each
// a kernel on the stream. The workspaces follow CUDA's layout: LSTM keeps the
// activated gates (i, f, g, o); GRU keeps r, z, n, the hidden part of n, and hx.
#include <ATen/ATen.h>
#include <torch/library.h>

namespace openreg::eager {
namespace {

using at::Tensor;

Tensor gates_with_bias(const Tensor& input_gates, const Tensor& hidden_gates, const std::optional<Tensor>& input_bias,
                       const std::optional<Tensor>& hidden_bias) {
  Tensor gates = input_gates + hidden_gates;
  if (input_bias && input_bias->defined()) gates = gates + *input_bias;
  if (hidden_bias && hidden_bias->defined()) gates = gates + *hidden_bias;
  return gates;
}

std::tuple<Tensor, Tensor, Tensor> lstm_cell(const Tensor& input_gates, const Tensor& hidden_gates, const Tensor& cx,
                                             const std::optional<Tensor>& input_bias,
                                             const std::optional<Tensor>& hidden_bias) {
  auto chunks = gates_with_bias(input_gates, hidden_gates, input_bias, hidden_bias).chunk(4, 1);
  Tensor i = chunks[0].sigmoid(), f = chunks[1].sigmoid(), g = chunks[2].tanh(), o = chunks[3].sigmoid();
  Tensor cy = f * cx + i * g;
  Tensor hy = o * cy.tanh();
  return {hy, cy, at::cat({i, f, g, o}, 1)};
}

std::tuple<Tensor, Tensor, Tensor> lstm_cell_backward(const std::optional<Tensor>& grad_hy,
                                                      const std::optional<Tensor>& grad_cy, const Tensor& cx,
                                                      const Tensor& cy, const Tensor& workspace, bool has_bias) {
  if ((!grad_hy || !grad_hy->defined()) && (!grad_cy || !grad_cy->defined())) return {};
  auto gates = workspace.chunk(4, 1);
  const Tensor &i = gates[0], &f = gates[1], &g = gates[2], &o = gates[3];
  Tensor tanh_cy = cy.tanh();
  Tensor gcy = at::zeros_like(cy);
  Tensor go = at::zeros_like(o);
  if (grad_hy && grad_hy->defined()) {
    gcy = gcy + *grad_hy * o * (1 - tanh_cy * tanh_cy);
    go = *grad_hy * tanh_cy * o * (1 - o);
  }
  if (grad_cy && grad_cy->defined()) gcy = gcy + *grad_cy;
  Tensor gi = gcy * g * i * (1 - i);
  Tensor gf = gcy * cx * f * (1 - f);
  Tensor gg = gcy * i * (1 - g * g);
  Tensor grad_gates = at::cat({gi, gf, gg, go}, 1);
  return {grad_gates, gcy * f, has_bias ? grad_gates.sum(0) : Tensor()};
}

std::tuple<Tensor, Tensor> gru_cell(const Tensor& input_gates, const Tensor& hidden_gates, const Tensor& hx,
                                    const std::optional<Tensor>& input_bias, const std::optional<Tensor>& hidden_bias) {
  Tensor ig = input_bias && input_bias->defined() ? input_gates + *input_bias : input_gates;
  Tensor hg = hidden_bias && hidden_bias->defined() ? hidden_gates + *hidden_bias : hidden_gates;
  auto in = ig.chunk(3, 1), hn = hg.chunk(3, 1);
  Tensor r = (in[0] + hn[0]).sigmoid();
  Tensor z = (in[1] + hn[1]).sigmoid();
  Tensor n = (in[2] + r * hn[2]).tanh();
  Tensor hy = n + z * (hx - n);
  return {hy, at::cat({r, z, n, hn[2], hx}, 1)};
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> gru_cell_backward(const Tensor& grad_hy, const Tensor& workspace,
                                                                     bool has_bias) {
  auto parts = workspace.chunk(5, 1);
  const Tensor &r = parts[0], &z = parts[1], &n = parts[2], &hn = parts[3], &hx = parts[4];
  Tensor gz = grad_hy * (hx - n) * z * (1 - z);
  Tensor gn = grad_hy * (1 - z) * (1 - n * n);
  Tensor gr = gn * hn * r * (1 - r);
  Tensor grad_input_gates = at::cat({gr, gz, gn}, 1);
  Tensor grad_hidden_gates = at::cat({gr, gz, gn * r}, 1);
  return {grad_input_gates, grad_hidden_gates, grad_hy * z, has_bias ? grad_input_gates.sum(0) : Tensor(),
          has_bias ? grad_hidden_gates.sum(0) : Tensor()};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_thnn_fused_lstm_cell", &lstm_cell);
  m.impl("_thnn_fused_lstm_cell_backward_impl", &lstm_cell_backward);
  m.impl("_thnn_fused_gru_cell", &gru_cell);
  m.impl("_thnn_fused_gru_cell_backward", &gru_cell_backward);
}

}  // namespace openreg::eager
