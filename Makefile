# The README's two commands. Both work on a fresh Debian machine: they install what is missing.
#   make run    build (Release, build/) and run the main job on its embedded default
#   make test   build and run the CPU test suite through ctest (labels: fast; slow and gpu are skipped)
# Other targets: deps, build, sanitize (ASan+UBSan test suite in build-asan/), test-slow, clean,
# fuzz (libFuzzer on the .npy reader, then on the checkpoint reader, FUZZ_SECONDS each, clang, in build-fuzz/;
# not part of the build), notebooks (runs the literate C++ notebooks of notebooks-cpp/ at full size, Markdown
# into reports/notebooks/).
BUILD    ?= build
ASAN     ?= build-asan
FUZZ     ?= build-fuzz
FUZZ_SECONDS ?= 60
JOBS     ?= $(shell nproc)
CMAKE_ARGS ?=

DEBIAN_PACKAGES := cmake g++ make pkg-config ccache libeigen3-dev libboost-dev libmpfr-dev libgmp-dev libfmt-dev \
                   catch2 libcli11-dev nlohmann-json3-dev gnuplot-nox python3-numpy \
                   python3-dev pybind11-dev python3-pybind11
# MPI: `mpirun -np N vla study run ...` splits sweeps over ranks (docs/parallel.md); the CI test runs mpirun.
DEBIAN_PACKAGES += libopenmpi-dev openmpi-bin

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

NOTEBOOKS := $(filter-out render,$(basename $(notdir $(wildcard notebooks-cpp/*.cpp))))

.PHONY: all deps configure build run test sanitize test-slow fuzz notebooks clean
all: build

deps:
	@missing=""; for p in $(DEBIAN_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing missing Debian packages:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	else echo "all Debian packages present"; fi

$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)

configure: deps $(BUILD)/CMakeCache.txt

build: configure
	cmake --build $(BUILD) -j $(JOBS)

run: build
	$(BUILD)/bin/vla claims --quick --out reports --markdown reports/claims.md --json reports/claims.json
	$(BUILD)/bin/vla stability --out reports/fig4

test: build
	ctest --test-dir $(BUILD) -L fast --output-on-failure -j $(JOBS)

test-slow: build
	ctest --test-dir $(BUILD) -L slow --output-on-failure -j $(JOBS)

# The study suite's end-to-end --quick run (226 small training runs through the built `vla`) is left out
# under the sanitizers: 1051 s there on the 2-core VM against 71 s in Release, where `make test` runs it;
# the training code it drives is under the sanitizers through the train and fuzz tests. So are the mpirun
# tests (four study runs of 4 training runs each, and a data-parallel training run, through Open MPI, 5-8 s
# in Release on the 2-core VM): the splitting code runs under the sanitizers in the thread-rank tests
# (tests/core/parallel_test.cpp, tests/studies/sweep_ranks_test.cpp, tests/train/data_parallel_test.cpp),
# and Open MPI's components leak at MPI_Finalize in a module LeakSanitizer cannot name.
# -Og, not -O1: with UBSan, GCC's -O1 passes over the explicit-instantiation units cost twice what -Og's
# do (build/precision_instances/layer_forward_double.cpp: 90 s of CPU at -O1 against 50 s at -Og; ASan
# alone at -O1 40 s; 2-core VM), and the two builds of CI must fit its 90 minutes.
SANITIZE_SKIP ?= every study runs in --quick mode|mpirun -np 2 vla
sanitize: deps
	cmake -S . -B $(ASAN) -DCMAKE_BUILD_TYPE=Sanitize -DCMAKE_CXX_FLAGS_SANITIZE="-Og -g1" -DVLA_SANITIZE=ON $(CMAKE_ARGS)
	cmake --build $(ASAN) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --test-dir $(ASAN) -L fast --output-on-failure -j $(JOBS) \
	  -E '$(SANITIZE_SKIP)'

# libFuzzer needs clang and its runtime (Debian: clang, libclang-rt-dev). The .npy seeds are written by
# NumPy (Debian's python3-numpy, hence /usr/bin/python3), the checkpoint seeds by tiny training runs
# (checkpoint_seeds). Each corpus grows in $(FUZZ)/corpus/<reader> across runs; an input that breaks
# the contract is saved as $(FUZZ)/crash-* (.npy) or $(FUZZ)/checkpoint-crash-* and the run fails.
FUZZ_OPTIONS = -max_total_time=$(FUZZ_SECONDS) -timeout=5 -rss_limit_mb=2048 -malloc_limit_mb=256 -print_final_stats=1
fuzz:
	$(MAKE) deps DEBIAN_PACKAGES="$(DEBIAN_PACKAGES) clang libclang-rt-dev"
	cmake -S . -B $(FUZZ) -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=clang++ -DVLA_ENABLE_CUDA=OFF -DVLA_FUZZ=ON $(CMAKE_ARGS)
	cmake --build $(FUZZ) -j $(JOBS) --target npy_fuzzer checkpoint_fuzzer checkpoint_seeds
	/usr/bin/python3 tests/fuzz/libfuzzer/make_npy_seeds.py $(FUZZ)/seeds/npy
	$(FUZZ)/bin/checkpoint_seeds $(FUZZ)/seeds/checkpoint
	mkdir -p $(FUZZ)/corpus/npy $(FUZZ)/corpus/checkpoint
	$(FUZZ)/bin/npy_fuzzer $(FUZZ_OPTIONS) -dict=tests/fuzz/libfuzzer/npy.dict -artifact_prefix=$(FUZZ)/ \
	  $(FUZZ)/corpus/npy $(FUZZ)/seeds/npy
	$(FUZZ)/bin/checkpoint_fuzzer $(FUZZ_OPTIONS) -dict=tests/fuzz/libfuzzer/checkpoint.dict \
	  -artifact_prefix=$(FUZZ)/checkpoint- $(FUZZ)/corpus/checkpoint $(FUZZ)/seeds/checkpoint

notebooks: build
	for n in $(NOTEBOOKS); do $(BUILD)/bin/nb_render notebooks-cpp/$$n.cpp $(BUILD)/bin/nb_$$n reports/notebooks/$$n.md || exit 1; done

clean:
	rm -rf $(BUILD) $(ASAN) $(FUZZ)
