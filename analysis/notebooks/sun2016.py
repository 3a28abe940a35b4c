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
# # Sun et al. 2016: Ensemble-Compression (EC-DNN) vs model averaging (MA-DNN)
#
# K workers train on disjoint shards of a fixed training set. MA-DNN averages parameters every
# 16 updates; EC-DNN forms the output ensemble G of the K models every tau updates and
# compresses it back into each local model through the combined loss during the next local
# phase; E-DNN skips the compression. Comparison basis: **round-matched** (the same local updates
# per worker for every method). G = global model, L = local model 0. Tables: CIFAR-10 and
# CIFAR-100 stand-ins at K = 4 and 8 (error %), speed curves, bytes per update.

# %%
import pandas as pd

from analysis.notebook_support import PaperResults   # the checkout's analysis/ package, from any folder

pd.set_option("display.width", 200, "display.max_columns", 30, "display.precision", 4)
r = PaperResults("sun2016")

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
