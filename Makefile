# The two commands a newcomer needs: `make book` and `make test`. Both set up .venv themselves.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
NOTEBOOKS := $(wildcard notebooks/*.py)
CHAPTERS := $(foreach n,$(NOTEBOOKS),$(firstword $(subst _, ,$(notdir $(n)))))
RESULTS := $(CURDIR)/_build/results
# jupyter-cache keys on a notebook's code cells only; these inputs change results too
BOOK_INPUTS := src checkpoints requirements.txt constraints.txt pyproject.toml

.PHONY: book test book-tests unit nbval sync clean replicate ch3-a-a

# requirements.txt names the book's environment; constraints.txt pins the exact versions it
# was tested with; the package itself installs with its dependencies (nothing hidden).
# Bytecode: pip installs with --no-compile, then compileall writes every .pyc two files at a
# time (23 s here, against about 40 s of pip compiling one file at a time). Compiled at install,
# because where PYTHONDONTWRITEBYTECODE is set (as on this project's machines) Python never
# caches what it compiles: every process (each test's subprocess, each chapter's kernel) then
# compiled torch and open_clip again, 10.2 -> 3.7 s for `import torch, open_clip` on 12-06.
# torch's py312_intrinsics.py is Python 3.12 syntax that 3.11 never imports (pip skips it too).
$(STAMP): requirements.txt constraints.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --no-compile --upgrade pip
	$(BIN)/pip install -q --no-compile -c constraints.txt -r requirements.txt
	$(BIN)/pip install -q --no-compile -c constraints.txt -e .
	$(BIN)/python -m compileall -q -j 2 -x 'torch/testing/_internal/py312_intrinsics\.py' \
		"$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" src > /dev/null
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 > /dev/null
	touch $(STAMP)

# Every kernel of the venv reads $(VENV)/etc/ipython/ (IPython's folder for its environment),
# whoever starts it: plain papermill, myst-nb in `make book`, nbval, Jupyter. This file drops
# ipykernel's "running over TCP without encryption" notice for kernels on loopback only
# (fgclip.progress.quiet_loopback_kernels); the runner encrypts its kernels' channels instead.
KERNEL_CONFIG := $(VENV)/etc/ipython/ipython_kernel_config.py
$(KERNEL_CONFIG): Makefile | $(STAMP)
	mkdir -p $(@D)
	echo 'from fgclip.progress import quiet_loopback_kernels; quiet_loopback_kernels()' > $@.tmp
	mv $@.tmp $@

# The chapters execute BOOK_JOBS at a time, one torch thread each, into jupyter-book's cache
# (fgclip.book_cache), the longest first; jupyter-book then renders from the cache. On the
# 2-core machine this takes about 60% of the time of jupyter-book's one-after-the-other run.
BOOK_JOBS ?= 2
# ch1 and ch3 first, then ch4, ch0, ch2: on a clean clone of b4fb4ac in CI (AMD EPYC, 2 cores, 12-06: ch1 642,
# ch3 353, ch4 303, ch0 182, ch2 61 s) the order ch1 ch3 ch0 ch4 ch2 ended its lanes at 703 and 839 s; in
# this order ch4 follows ch3 (656 s), ch0 follows ch1 (824 s) and ch2 ch4 (717 s); `make book` on that
# clone at 4702770 (venv in place): chapters 809 s, 815 s in all
# ch5 (issue 36, about 270 s on 2026-12-07's slower host, ~170 s at 0d6f928's speed) goes third: at 0d6f928's
# times the lanes become ch1 -> ch0 -> ch2 (1015 s) and ch3 -> ch5 -> ch4 (1016 s)
BOOK_CHAPTER_ORDER := ch1 ch3 ch5 ch4 ch0 ch2
BOOK_ORDER := $(foreach c,$(BOOK_CHAPTER_ORDER),$(wildcard notebooks/$(c)_*.ipynb)) \
	$(filter-out $(foreach c,$(BOOK_CHAPTER_ORDER),notebooks/$(c)_%),$(wildcard notebooks/ch*.ipynb))

## Build and execute the whole book on the toy world: HTML in _build/html, each chapter's
## results (with its verdicts) in _build/results/<chapter>.json; fails on any cell error.
book: $(STAMP) sync
	@changed=$$(find $(BOOK_INPUTS) -type f -newer _build/.executed -not -name '*.pyc' -not -path '*egg-info*' 2>/dev/null | head -1); \
	missing=$$(for c in $(CHAPTERS); do test -f $(RESULTS)/$$c.json || echo $$c; done | xargs); \
	if [ -d _build/.jupyter_cache ] && { [ ! -f _build/.executed ] || [ -n "$$changed" ] || [ -n "$$missing" ]; }; then \
		echo "make book: executing every chapter afresh ($${changed:+$$changed changed; }$${missing:+no results yet for $$missing})"; \
		rm -rf _build/.jupyter_cache; \
	fi
	mkdir -p $(RESULTS)
	CI=$${CI:-true} FGCLIP_STATIC_WIDGETS=1 FGCLIP_RESULTS_DIR=$(RESULTS) OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 \
		$(BIN)/python -m fgclip.book_cache --jobs $(BOOK_JOBS) $(BOOK_ORDER) \
		$${FGCLIP_BOOK_STAGE:+--adopt $$FGCLIP_BOOK_STAGE --inputs $(BOOK_INPUTS)}
	CI=$${CI:-true} FGCLIP_STATIC_WIDGETS=1 FGCLIP_RESULTS_DIR=$(RESULTS) $(BIN)/jupyter-book build . --all || (cat _build/html/reports/*.log 2>/dev/null; exit 1)
	test -f _build/html/index.html
	@for c in $(CHAPTERS); do test -f $(RESULTS)/$$c.json || { echo "make book: $$c wrote no $(RESULTS)/$$c.json"; exit 1; }; done
	touch _build/.executed

## Run every test: unit tests, then each chapter notebook under nbval with default parameters.
## With FGCLIP_BOOK_STAGE=<folder> (.ci/run), nbval also writes each chapter it ran whole there,
## executed, and its results to _build/results; `make book` then adopts those (fgclip.nbval_stage).
## JOBS test processes side by side (pytest-xdist), each test file (each notebook) whole in one
## of them, one torch thread each: on 2 cores this takes about 60% of the time of one process.
JOBS ?= 2
# The notebooks in make book's order (BOOK_ORDER, the longest first), not reordered by cell count:
# pytest-xdist's loadfile hands each worker the next notebook in line when the one it runs is
# down to its last 2 cells, as book_cache's pool does. At 0d6f928's chapter times (ch1 654, ch3
# 436, ch4 410, ch0 271, ch2 90 s) that is ch1 -> ch0 and ch3 -> ch4 -> ch2, lanes of 925 and
# 936 s; xdist's default order by cell count (ch2, ch4, ch1, ch3, ch0) ends at 1015 s.
test: $(STAMP) sync
	TESTING=1 $(BIN)/python -m pytest -q -n $(JOBS) --dist loadfile --durations=15 tests
	mkdir -p $(RESULTS)
	env $${FGCLIP_BOOK_STAGE:+FGCLIP_RESULTS_DIR=$(RESULTS)} FGCLIP_BOOK_INPUTS="$(BOOK_INPUTS)" \
		OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 TESTING=1 FGCLIP_STATIC_WIDGETS=1 \
		$(BIN)/python -m pytest -q -n $(JOBS) --dist loadfile --no-loadscope-reorder -p fgclip.nbval_stage \
		--nbval-lax --nbval-current-env $(BOOK_ORDER)

## The tests that read the built book (_build/html, _build/results): `make test` runs them too,
## but before `make book` they skip (the browser) or read the committed fixtures (the critiques).
BOOK_TESTS := tests/test_book_browser.py tests/test_book_results.py tests/test_ch2_critique.py \
	tests/test_ch3_critique.py tests/test_ch4_critique.py tests/test_ch5_results.py
book-tests: $(STAMP)
	TESTING=1 $(BIN)/python -m pytest -q -n $(JOBS) --dist load $(BOOK_TESTS)

## Rerun every chapter at a disjoint base seed (fresh toy data and training seeds) and print its
## verdicts beside the book's (needs `make book` first); fails when a verdict reverses. Writes
## book/replication_last.md, the table of the book's page "Do the verdicts replicate?".
replicate: $(STAMP) sync
	CI=$${CI:-true} OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(BIN)/python -m fgclip replicate --book $(RESULTS) \
		--jobs $(BOOK_JOBS) --chapters $(foreach n,$(BOOK_ORDER),$(firstword $(subst _, ,$(notdir $(n)))))

## Chapter 3's A/A control at 20 seeds a side (10-11 min with one torch thread), which the book cannot
## pay for: writes book/ch3_a_a_last.md, the table its critique page includes.
ch3-a-a: $(STAMP) sync
	CI=$${CI:-true} $(BIN)/python -m fgclip ch3-a-a --per-side 20

## Pair every notebook's py:percent file with its committed .ipynb (outputs stripped).
sync: $(STAMP) $(KERNEL_CONFIG)
	$(BIN)/jupytext --sync $(NOTEBOOKS) > /dev/null

clean:
	rm -rf _build runs
