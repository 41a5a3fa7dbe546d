# Thin wrappers over CMake. Each target installs missing Debian packages first.
BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
FUZZ_SECONDS ?= 60
SMOKE_SECONDS ?= 10
PREFIX     ?= /usr/local

.PHONY: all deps build build-asan fuzz-build sim test fuzz fuzz-smoke bench bench-compare lint clean \
        install uninstall mutate

all: build

deps:
	@./scripts/deps.sh

# `make sim` keeps the build's output back and prints it only when the build fails.
BUILD_QUIET := $(filter sim,$(MAKECMDGOALS))

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ifeq ($(BUILD_QUIET),)
	@cmake --build $(BUILD) -j $(JOBS)
else
	@log=$$(mktemp); cmake --build $(BUILD) -j $(JOBS) >"$$log" 2>&1 || { cat "$$log"; rm -f "$$log"; exit 1; }; rm -f "$$log"
endif

build-asan: deps
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DPD_SANITIZE=ON >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)

# the table, and from the same run's JSON build/report.html (docs/report.md)
sim: build
	@rc=0; $(BUILD)/pdref sim run scenarios --mode all --json-out $(BUILD)/sim.json || rc=$$?; \
	$(BUILD)/pdref report --out $(BUILD)/report.html $(BUILD)/sim.json || rc=2; exit $$rc

test: build build-asan
	@./scripts/deps.sh --test
	@./scripts/lint.sh
	@./tests/check_refs_test.sh
	@./tests/check_doc_names_test.sh
	@./scripts/check-spec.sh
	@./tests/check_behaviour_test.sh
	@./tests/report_browser_test.sh $(BUILD)/pdref
	@./tests/help_test.sh $(BUILD)/pdref
	@$(BUILD)/pdref sim run scenarios --mode all
	@./tests/explore_parallel_test.sh $(BUILD)/pdref
	@./tests/schema_test.sh $(BUILD)/pdref
	@./tests/output_schema_test.sh $(BUILD)/pdref
	@./tests/install_test.sh $(BUILD)
	@./scripts/mutate.py --self-test
	@ASAN_OPTIONS=exitcode=86:detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 $(ASAN_BUILD)/pdref_tests
	@$(MAKE) --no-print-directory fuzz-smoke

# Mutation testing (docs/mutation.md): not part of test; its own private trees under
# build/mutate/. MUTATE_ARGS (default --jobs 2), e.g. "--count 20 --targets checker".
MUTATE_ARGS ?= --jobs 2
mutate: deps
	@nice ./scripts/mutate.py $(MUTATE_ARGS)

fuzz-build: deps
	@cmake -S . -B $(FUZZ_BUILD) -DCMAKE_C_COMPILER=clang-14 -DCMAKE_BUILD_TYPE=Debug -DPD_FUZZ=ON >/dev/null
	@cmake --build $(FUZZ_BUILD) -j $(JOBS)

fuzz: fuzz-build
	@./scripts/fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

fuzz-smoke: fuzz-build
	@./scripts/fuzz.sh $(FUZZ_BUILD) $(SMOKE_SECONDS)

lint:
	@./scripts/lint.sh
	@./tests/check_refs_test.sh
	@./tests/check_doc_names_test.sh
	@./scripts/check-spec.sh
	@./tests/check_behaviour_test.sh

# Each figure under the command that printed it ("$ ..."): docs/benchmarks.md. Before/after of
# a change: make bench-compare BASE=<git revision>.
bench: build
	@echo '$$ $(BUILD)/pdref sim bench'
	@$(BUILD)/pdref sim bench
	@echo '$$ $(BUILD)/pdref sim bench --scenario bench/scenarios/hour-1000rps-8p8d.json --requests 360000'
	@$(BUILD)/pdref sim bench --scenario bench/scenarios/hour-1000rps-8p8d.json --requests 360000
	@echo "explore, one process, then one per core; seeds per CPU-s at the end of each line (pdref sim explore --mode reference --seeds 20000 --jobs 1|0):"
	@$(BUILD)/pdref sim explore --mode reference --seeds 20000 --out $(BUILD)/bench-explore --jobs 1 | grep '^timing:'
	@$(BUILD)/pdref sim explore --mode reference --seeds 20000 --out $(BUILD)/bench-explore --jobs 0 | grep '^timing:'
	@echo '$$ $(BUILD)/pdref gateway bench'
	@$(BUILD)/pdref gateway bench

# Before/after in one run on this machine: builds BASE (a git revision) next to this tree and
# alternates the simulator's benchmarks between the two (scripts/bench-compare.py --help).
bench-compare: build
	@[ -n "$(BASE)" ] || { echo "usage: make bench-compare BASE=<git revision> [ROUNDS=3]" >&2; exit 2; }
	@./scripts/bench-compare.py --base "$(BASE)" --rounds $(or $(ROUNDS),3)

# PREFIX (default /usr/local) and DESTDIR as usual: make install DESTDIR=/tmp/stage PREFIX=/usr
install: build
	@DESTDIR="$(DESTDIR)" cmake --install $(BUILD) --prefix "$(PREFIX)"

# Removes what the last `make install` wrote (its list: $(BUILD)/install_manifest.txt, which
# leaves DESTDIR out: give the same DESTDIR as to make install).
uninstall:
	@[ ! -f $(BUILD)/install_manifest.txt ] || sed 's|^|$(DESTDIR)|' $(BUILD)/install_manifest.txt | xargs -r -d '\n' rm -f --

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
