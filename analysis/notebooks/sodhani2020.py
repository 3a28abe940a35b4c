# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Sodhani et al. 2020: a closer look at codistillation for distributed training
#
# Comparison basis: **device- and update-matched** (all-reduce over 2 workers vs 2 models x 1
# worker on the same 2 workers, the same number of updates, so each codistilling model sees half
# the samples), in a multi-epoch regime (a fixed, finite embedded training set), with explicit
# regularisation reduced for codistillation (L2 1e-4 -> 1e-5 after the first decay -> 0 after the
# second). Figures: Fig. 1 (out of the box), Fig. 2 (reduced L2), Fig. 3 (2x batch), Fig. 4
# (cosine), Fig. 5 (NMT), Sec. 4 (NMT, small data), Fig. 6 (less data), Fig. 7a/b (exchange
# period, LR), and the bytes communicated per update.

# %%
import pandas as pd

from analysis.notebook_support import PaperResults   # the checkout's analysis/ package, from any folder

pd.set_option("display.width", 200, "display.max_columns", 30, "display.precision", 4)
r = PaperResults("sodhani2020")

# %% [markdown]
# ## Figures
# Each figure's mean over seeds per series (recomputed from the per-run table `<figure>.csv`);
# for tables, the paper's numbers beside ours (recomputed from `<figure>_values.csv`). The plots
# are the PNGs next to this notebook.

# %%
r.show_figures()

# %% [markdown]
# ## Claims
# Recomputed from the figures' tables by `analysis/claims.py` (verdict rule: docs/claims.md, "Claims"),
# then checked against the pipeline's `claims.csv`. A verdict is drawn only when every regime
# check (the `regime` column: each precondition of the paper's mechanism, measured) passes;
# otherwise the claim reads "not in the paper's regime" or "not tested at this scale". Bounds are
# one-sided at 95% (the `method` column); `reached` counts the seeds that reached a speedup's target.

# %%
claims = r.show_claims()
