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
# # Anil et al. 2018: large-scale distributed training through online distillation
#
# Codistillation: n = 2 models, each trained with sync SGD inside its own group, each also
# distilling from a stale checkpoint of the other (reloaded every k steps) after a burn-in.
# Comparison basis: **step-matched with extra hardware** (each codistilling model has the sync
# baseline's batch, so 2-way codistillation uses twice the workers), in an effectively
# infinite-data regime: the embedded LM streams fresh text from a known HMM and never repeats.
# Figures: Fig. 1 (sync SGD stops improving with more workers), Fig. 2a (codistillation vs
# sync, label smoothing, ensemble), Fig. 2b (disjoint vs same data), Fig. 3 (ImageNet stand-in),
# Fig. 4 (stale teachers), Table 1 (Criteo stand-in: log loss and prediction churn).

# %%
import pandas as pd

from analysis.notebook_support import PaperResults   # the checkout's analysis/ package, from any folder

pd.set_option("display.width", 200, "display.max_columns", 30, "display.precision", 4)
r = PaperResults("anil2018")

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
