// PyTorch sends LSTM and GRU cells on accelerators to fused ops that only CUDA
// implements (_thnn_fused_*). On openreg they are composed of ATen ops, each
// a kernel on the stream. The workspaces follow CUDA's layout: LSTM keeps the
// activated gates (i, f, g, o); GRU keeps r, z, n, the hidden part of n, and hx.
#include <ATen/ATen.h>
#include <ATen/TensorUtils.h>
#include <torch/library.h>

namespace openreg::eager {
namespace {

using at::Tensor;

// CUDA's checks (RNN.cu), before any kernel reads the gates: factor 4 for LSTM, 3 for GRU.
void check_sizes(at::CheckedFrom c, const Tensor& input_gates, const Tensor& hidden_gates,
                 const std::optional<Tensor>& input_bias, const std::optional<Tensor>& hidden_bias, int64_t factor,
                 const Tensor& prev_hidden) {
  const at::TensorArg ig{input_gates, "input_gates", 1}, hg{hidden_gates, "hidden_gates", 2};
  const Tensor ib_t = input_bias.value_or(Tensor()), hb_t = hidden_bias.value_or(Tensor());
  const at::TensorArg ib{ib_t, "input_bias", 3}, hb{hb_t, "hidden_bias", 4}, ph{prev_hidden, "prev_hidden", 5};
  at::checkDim(c, ig, 2);
  at::checkSameSize(c, ig, hg);
  const int64_t gates_size = input_gates.size(1);
  if (ib_t.defined()) {
    at::checkDim(c, ib, 1);
    at::checkNumel(c, ib, gates_size);
    at::checkSameSize(c, ib, hb);
  }
  at::checkDim(c, ph, 2);
  at::checkNumel(c, ph, input_gates.size(0) * gates_size / factor);
  at::checkAllSameGPU(c, {ig, hg, ib, hb, ph});
}

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
  check_sizes("_thnn_fused_lstm_cell", input_gates, hidden_gates, input_bias, hidden_bias, 4, cx);
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
  {
    const at::CheckedFrom c = "fused_lstm_cell_backward";
    const Tensor ghy = grad_hy.value_or(Tensor()), gcy_in = grad_cy.value_or(Tensor());
    const at::TensorArg hy_arg{ghy, "grad_hy", 1}, cy_arg{gcy_in, "grad_cy", 2}, cx_arg{cx, "cx", 3},
        cy_out{cy, "cy", 4}, ws{workspace, "workspace", 5};
    const at::TensorArg& defined_grad = ghy.defined() ? hy_arg : cy_arg;
    at::checkDim(c, defined_grad, 2);
    const auto size = defined_grad->sizes();
    if (ghy.defined()) at::checkSize(c, hy_arg, size);
    if (gcy_in.defined()) at::checkSize(c, cy_arg, size);
    at::checkSize(c, cx_arg, size);
    at::checkSize(c, cy_out, size);
    at::checkDim(c, ws, 2);
    at::checkNumel(c, ws, size[0] * size[1] * 4);
  }
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
  check_sizes("_thnn_fused_gru_cell", input_gates, hidden_gates, input_bias, hidden_bias, 3, hx);
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
  const at::TensorArg hy_arg{grad_hy, "grad_hy", 1}, ws{workspace, "workspace", 2};
  at::checkDim("fused_gru_cell_backward", hy_arg, 2);
  at::checkSize("fused_gru_cell_backward", ws, {grad_hy.size(0), grad_hy.size(1) * 5});
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
