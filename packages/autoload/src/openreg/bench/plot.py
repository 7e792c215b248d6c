"""`openreg bench --plot`: a PNG bar chart of the openreg/CPU time ratios (needs matplotlib)."""

from __future__ import annotations

from pathlib import Path


def require_matplotlib():
    """matplotlib, set up to write files; exits with the fix when it is not installed."""
    try:
        import matplotlib
    except ImportError:
        raise SystemExit(
            'openreg bench --plot needs matplotlib, which is not installed. Fix: pip install "openreg[plot]" '
            "(or pip install matplotlib)"
        ) from None
    matplotlib.use("Agg")  # files only: no display needed
    return matplotlib


def plot(figures: dict[str, dict], path: Path) -> None:
    """One horizontal bar per case: openreg time / CPU time; the line at 1 is the CPU."""
    require_matplotlib()
    import matplotlib.pyplot as plt

    rows = [(f"{suite}: {r['name']}", r["ratio"]) for suite, f in figures.items() for r in f["results"]]
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(rows) + 1.5))
    labels, ratios = zip(*reversed(rows), strict=True) if rows else ((), ())
    bars = ax.barh(labels, ratios, color=["tab:green" if r <= 1.1 else "tab:orange" for r in ratios])
    ax.bar_label(bars, labels=[f"{r:.2f}x" for r in ratios], padding=3)
    ax.axvline(1.0, color="black", linewidth=1)
    ax.set_xscale("log")  # ratios span orders of magnitude (a launch round trip against a memcpy)
    ax.set_xlim(min((*ratios, 1.0)) / 1.5, max((*ratios, 1.0)) * 3)
    ax.set_xlabel("openreg time / CPU time (log scale; lower is better)")
    ax.set_title("openreg vs CPU")
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=100)
    plt.close(fig)
