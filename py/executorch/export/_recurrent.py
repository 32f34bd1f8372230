"""nn.LSTM and nn.GRU as one input projection per layer, then per time step one matrix product and
one cell operator; for CudaBackend, one operator per layer and direction.

torch's own decomposition of aten.lstm/aten.gru spells each step's gate arithmetic as a dozen
elementwise operators (split, three sigmoids, tanh, products, sums), each a kernel of its own.
Here the gates of a step are an `executorch::lstm_cell` or `executorch::gru_cell` call: one kernel,
on the CPU and on CudaBackend. On the GPU a step's matrix product and cell are still two kernels
of a few microseconds each, most of it waiting on the one before; `executorch::lstm_layer` and
`executorch::gru_layer` run every step of a layer as one kernel where its weights are small, and
one kernel per step otherwise. The torch implementations below are the reference the runtime's
kernels follow (docs/program_format.md states the arithmetic).
"""

from __future__ import annotations

from typing import Any, Callable

import torch
import torch.nn.functional as F

LSTM_CELL = "executorch::lstm_cell"
GRU_CELL = "executorch::gru_cell"
LSTM_LAYER = "executorch::lstm_layer"
GRU_LAYER = "executorch::gru_layer"


@torch.library.custom_op(LSTM_CELL, mutates_args=())
def lstm_cell(input_gates: torch.Tensor, hidden_gates: torch.Tensor, cell: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One LSTM step from its gate pre-activations: input_gates = x W_ih^T + b_ih and
    hidden_gates = h W_hh^T + b_hh, both [B, 4H] in PyTorch's order (input, forget, cell, output);
    cell [B, H]. Returns the new hidden state and cell, [B, H] each."""
    i, f, g, o = (input_gates.float() + hidden_gates.float()).chunk(4, dim=-1)
    c = torch.sigmoid(f) * cell.float() + torch.sigmoid(i) * torch.tanh(g)
    h = torch.sigmoid(o) * torch.tanh(c)
    return h.to(cell.dtype), c.to(cell.dtype)


@lstm_cell.register_fake
def _(input_gates: torch.Tensor, hidden_gates: torch.Tensor, cell: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.empty_like(cell), torch.empty_like(cell)


@torch.library.custom_op(GRU_CELL, mutates_args=())
def gru_cell(input_gates: torch.Tensor, hidden_gates: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
    """One GRU step: input_gates = x W_ih^T + b_ih and hidden_gates = h W_hh^T + b_hh, both [B, 3H]
    in PyTorch's order (reset, update, new); hidden [B, H]. Returns the new hidden state."""
    xr, xz, xn = input_gates.float().chunk(3, dim=-1)
    hr, hz, hn = hidden_gates.float().chunk(3, dim=-1)
    r = torch.sigmoid(xr + hr)
    z = torch.sigmoid(xz + hz)
    n = torch.tanh(xn + r * hn)
    return ((1 - z) * n + z * hidden.float()).to(hidden.dtype)


@gru_cell.register_fake
def _(input_gates: torch.Tensor, hidden_gates: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(hidden)


def _steps(gates: torch.Tensor, state: list[torch.Tensor], reverse: bool,
           step: Callable[[torch.Tensor, list[torch.Tensor]], list[torch.Tensor]]) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Runs step(input_gates_t, state) -> new state over gates [T, B, G*H], backwards where
    `reverse`. Returns every step's hidden state (state[0]) in time order, [T, B, H], and the final
    state."""
    ys: list[torch.Tensor] = []
    for t in reversed(range(gates.shape[0])) if reverse else range(gates.shape[0]):
        state = step(gates[t], state)
        ys.append(state[0])
    if reverse:
        ys.reverse()
    return torch.stack(ys), state


@torch.library.custom_op(LSTM_LAYER, mutates_args=())
def lstm_layer(gates: torch.Tensor, w_hh: torch.Tensor, b_hh: torch.Tensor | None, h0: torch.Tensor,
               c0: torch.Tensor, reverse: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Every step of one LSTM layer and direction: gates [T, B, 4H] = x W_ih^T + b_ih of each step,
    w_hh [4H, H], b_hh [4H] or None, initial state h0 and c0 [B, H]; backwards in time where
    `reverse`. Each step is lstm_cell(gates[t], h W_hh^T + b_hh, c). Returns the hidden state of
    every step [T, B, H] (in time order) and the final hidden state and cell."""
    def step(g: torch.Tensor, state: list[torch.Tensor]) -> list[torch.Tensor]:
        return list(lstm_cell(g, F.linear(state[0], w_hh, b_hh), state[1]))

    y, (h, c) = _steps(gates, [h0, c0], reverse, step)
    return y, h.clone(), c.clone()


@lstm_layer.register_fake
def _(gates: torch.Tensor, w_hh: torch.Tensor, b_hh: torch.Tensor | None, h0: torch.Tensor, c0: torch.Tensor,
      reverse: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return gates.new_empty((gates.shape[0], *h0.shape)), torch.empty_like(h0), torch.empty_like(c0)


@torch.library.custom_op(GRU_LAYER, mutates_args=())
def gru_layer(gates: torch.Tensor, w_hh: torch.Tensor, b_hh: torch.Tensor | None, h0: torch.Tensor,
              reverse: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Every step of one GRU layer and direction, as lstm_layer: gates [T, B, 3H], w_hh [3H, H];
    each step is gru_cell(gates[t], h W_hh^T + b_hh, h). Returns [T, B, H] and the final hidden
    state."""
    def step(g: torch.Tensor, state: list[torch.Tensor]) -> list[torch.Tensor]:
        return [gru_cell(g, F.linear(state[0], w_hh, b_hh), state[0])]

    y, (h,) = _steps(gates, [h0], reverse, step)
    return y, h.clone()


@gru_layer.register_fake
def _(gates: torch.Tensor, w_hh: torch.Tensor, b_hh: torch.Tensor | None, h0: torch.Tensor,
      reverse: bool) -> tuple[torch.Tensor, torch.Tensor]:
    return gates.new_empty((gates.shape[0], *h0.shape)), torch.empty_like(h0)


# One layer and direction: run(gates [T, B, G*H], initial state, that direction's weights, reverse)
# -> (hidden states [T, B, H], final state).
_Direction = Callable[[torch.Tensor, list[torch.Tensor], list[torch.Tensor], bool],
                      tuple[torch.Tensor, list[torch.Tensor]]]


def _layers(x: torch.Tensor, states: list[torch.Tensor], params: list[torch.Tensor], has_biases: bool,
            num_layers: int, bidirectional: bool, run: _Direction) -> tuple[torch.Tensor, list[list[torch.Tensor]]]:
    """Runs the stacked (bi)directional recurrence over time-major x [T, B, F]. states[k] is the
    initial state k (h, and the LSTM's c) of every layer and direction, [layers * dirs, B, *].
    Returns the last layer's outputs and, per state, the final values of every layer and direction."""
    dirs = 2 if bidirectional else 1
    per = _per_direction(params, num_layers, bidirectional)
    finals: list[list[torch.Tensor]] = [[] for _ in states]
    for layer in range(num_layers):
        outputs = []
        for d in range(dirs):
            w = params[(layer * dirs + d) * per:(layer * dirs + d + 1) * per]
            w_ih, b_ih = w[0], w[2] if has_biases else None
            gates = F.linear(x, w_ih, b_ih)  # every step's input projection in one product
            y, state = run(gates, [s[layer * dirs + d] for s in states], w, d == 1)
            outputs.append(y)
            for k, s in enumerate(state):
                finals[k].append(s)
        x = outputs[0] if dirs == 1 else torch.cat(outputs, dim=-1)
    return x, finals


def _time_major(input: torch.Tensor, batch_first: bool) -> torch.Tensor:
    if input.dim() == 2:  # unbatched [T, F]
        return input.unsqueeze(1)
    return input.transpose(0, 1) if batch_first else input


def _caller_layout(y: torch.Tensor, input: torch.Tensor, batch_first: bool) -> torch.Tensor:
    if input.dim() == 2:
        return y.squeeze(1)
    return y.transpose(0, 1) if batch_first else y


def _per_direction(params: list[torch.Tensor], num_layers: int, bidirectional: bool) -> int:
    """How many weights each layer and direction has (0 where `params` does not split evenly)."""
    count = num_layers * (2 if bidirectional else 1)
    return len(params) // count if count and len(params) % count == 0 else 0


def _lstm(default: Callable[..., Any], layers: bool) -> Callable[..., Any]:
    def lstm(input: torch.Tensor, hx: list[torch.Tensor], params: list[torch.Tensor], has_biases: bool,
             num_layers: int, dropout: float, train: bool, bidirectional: bool, batch_first: bool) -> Any:
        per = _per_direction(params, num_layers, bidirectional)
        if (train and dropout > 0) or per not in (2, 3, 4, 5):
            return default(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)
        projected = per in (3, 5)  # proj_size: h = (o * tanh(c)) W_hr^T
        h0, c0 = (s.unsqueeze(1) if input.dim() == 2 else s for s in hx)

        def run(gates: torch.Tensor, state: list[torch.Tensor], w: list[torch.Tensor],
                reverse: bool) -> tuple[torch.Tensor, list[torch.Tensor]]:
            b_hh = w[3] if has_biases else None
            if layers and not projected:
                y, h, c = torch.ops.executorch.lstm_layer(gates, w[1], b_hh, state[0], state[1], reverse)
                return y, [h, c]

            def step(g: torch.Tensor, hc: list[torch.Tensor]) -> list[torch.Tensor]:
                h, c = torch.ops.executorch.lstm_cell(g, F.linear(hc[0], w[1], b_hh), hc[1])
                return [F.linear(h, w[-1]) if projected else h, c]

            return _steps(gates, state, reverse, step)

        y, (hs, cs) = _layers(_time_major(input, batch_first), [h0, c0], params, has_biases, num_layers,
                              bidirectional, run)
        h_n, c_n = torch.stack(hs), torch.stack(cs)
        if input.dim() == 2:
            h_n, c_n = h_n.squeeze(1), c_n.squeeze(1)
        return _caller_layout(y, input, batch_first), h_n, c_n

    return lstm


def _gru(default: Callable[..., Any], layers: bool) -> Callable[..., Any]:
    def gru(input: torch.Tensor, hx: torch.Tensor, params: list[torch.Tensor], has_biases: bool, num_layers: int,
            dropout: float, train: bool, bidirectional: bool, batch_first: bool) -> Any:
        per = _per_direction(params, num_layers, bidirectional)
        if (train and dropout > 0) or per not in (2, 4):
            return default(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)
        h0 = hx.unsqueeze(1) if input.dim() == 2 else hx

        def run(gates: torch.Tensor, state: list[torch.Tensor], w: list[torch.Tensor],
                reverse: bool) -> tuple[torch.Tensor, list[torch.Tensor]]:
            b_hh = w[3] if has_biases else None
            if layers:
                y, h = torch.ops.executorch.gru_layer(gates, w[1], b_hh, state[0], reverse)
                return y, [h]

            def step(g: torch.Tensor, h: list[torch.Tensor]) -> list[torch.Tensor]:
                return [torch.ops.executorch.gru_cell(g, F.linear(h[0], w[1], b_hh), h[0])]

            return _steps(gates, state, reverse, step)

        y, (hs,) = _layers(_time_major(input, batch_first), [h0], params, has_biases, num_layers, bidirectional, run)
        h_n = torch.stack(hs)
        return _caller_layout(y, input, batch_first), h_n.squeeze(1) if input.dim() == 2 else h_n

    return gru


def add_recurrent_decompositions(table: Any, layers: bool = False) -> None:
    """Replaces torch's decompositions of aten.lstm.input and aten.gru.input in `table` with the
    cell-operator forms above, or where `layers` (programs for CudaBackend) the layer operators but
    for projected LSTMs (torch's stay the fallback for what these do not cover: training-mode
    dropout)."""
    aten = torch.ops.aten
    table[aten.lstm.input] = _lstm(table[aten.lstm.input], layers)
    table[aten.gru.input] = _gru(table[aten.gru.input], layers)
