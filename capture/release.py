"""Causal release: a connection's ordered operations handed on at once, or held (capture/causal.py's
:class:`CausalGate`) until the bytes of the other direction their segment acknowledged have been handed
on, then let go in the order the gate says; its caps biting counted and reported once per connection.
"""

from __future__ import annotations

from collections.abc import Callable

from capture.causal import CausalGate, CausalLimits, first_waiting
from capture.events import CaptureEvent, anomaly
from capture.flows import Flow
from capture.options import CaptureOptions
from capture.reassembly import DATA, GAP
from capture.stats import CaptureStats

Deliver = Callable[[Flow, int, list[tuple]], list[CaptureEvent]]


def cap_report(flow: Flow, options: CaptureOptions) -> CaptureEvent:
    """The causal-order cap bit on this connection: reported once, as soon as it is known to be Kafka."""
    (ts, h), flow.causal_cap = flow.causal_cap, ()  # type: ignore[misc]
    return CaptureEvent(flow.info, anomaly(  # type: ignore[arg-type]
        "causal_order_limit", flow.dirs[h], ts,
        f"more than {options.max_causal_segments} segments or {options.max_causal_bytes} bytes waited for bytes "
        "of the other direction they acknowledge; the oldest went on without them (reported once)"))


class CausalRelease:
    """Between a connection's reassembly and ``deliver`` (capture/delivery.py): keeps the two directions
    in causal order."""

    def __init__(self, options: CaptureOptions, limits: CausalLimits, stats: CaptureStats,
                 deliver: Deliver) -> None:
        self.options = options
        self.limits = limits
        self.stats = stats
        self.deliver = deliver

    def emit(self, flow: Flow, h: int, ops: list[tuple], now: int) -> list[CaptureEvent]:
        """Operations of half ``h``, in its order, handed on at once or held until the bytes of the other
        half their segment acknowledged have been (see capture/causal.py)."""
        if not ops:
            return []
        gate = flow.gate
        if gate is None:
            i = first_waiting(flow.half(1 - h), ops)
            if i is None:
                return self.deliver(flow, h, ops)
            gate = flow.gate = CausalGate()
            out = self.deliver(flow, h, ops[:i])
            return out + self._hold(flow, gate, h, ops[i:], now)
        return self._hold(flow, gate, h, ops, now)

    def _hold(self, flow: Flow, gate: CausalGate, h: int, ops: list[tuple], now: int) -> list[CaptureEvent]:
        out: list[CaptureEvent] = []
        for op in ops:
            if op[0] == DATA:
                gate.hold(h, op, op[4])
            elif op[0] == GAP:
                gate.hold(h, op, None)
            else:
                out += self.deliver(flow, h, [op])     # a report (conflict, out of window): no order to keep
        last = gate.held[h][-1] if gate.held[h] else None
        out += self.release(flow, now)
        if flow.gate is not None and last is not None and gate.held[h] and gate.held[h][-1] is last:
            self.stats.causal_held += 1
        return out

    def release(self, flow: Flow, now: int, everything: bool = False) -> list[CaptureEvent]:
        """Hand on what the gate lets go now (``everything``: all, the connection ends); the cap biting
        is counted and reported once."""
        gate = flow.gate
        out: list[CaptureEvent] = []
        if gate is not None:
            for h, op, forced in gate.ready((flow.h0, flow.h1), now, self.limits, everything):
                if forced:
                    self.stats.causal_forced += 1
                    if flow.causal_cap is None:
                        flow.causal_cap = (op[3], h)
                        if flow.info is not None:
                            out.append(cap_report(flow, self.options))
                out += self.deliver(flow, h, [op])
        if not gate:
            flow.gate = None
        return out
