# The two commands a newcomer needs: `make book` and `make test`. Both set up .venv themselves.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
NOTEBOOKS := $(wildcard notebooks/*.py)

.PHONY: book test unit nbval sync clean

$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements.txt
	$(BIN)/pip install -q --no-deps -e .
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 > /dev/null
	touch $(STAMP)

## Build and execute the whole book on the toy world: HTML in _build/html, fails on any cell error.
book: $(STAMP) sync
	CI=$${CI:-true} FGCLIP_STATIC_WIDGETS=1 $(BIN)/jupyter-book build . --all || (cat _build/html/reports/*.log 2>/dev/null; exit 1)
	test -f _build/html/index.html

## Run every test: unit tests, then each chapter notebook under nbval with default parameters.
test: $(STAMP) sync
	TESTING=1 $(BIN)/python -m pytest -q tests
	TESTING=1 FGCLIP_STATIC_WIDGETS=1 $(BIN)/python -m pytest -q --nbval-lax --nbval-current-env notebooks/

## Pair every notebook's py:percent file with its committed .ipynb (outputs stripped).
sync: $(STAMP)
	$(BIN)/jupytext --sync $(NOTEBOOKS) > /dev/null

clean:
	rm -rf _build runs
