// `vla study list` and `vla study run ID...|all`: the paper's figures and tables as studies
// (studies/study.hpp, docs/studies.md). A run trains what its studies need through the shared run store
// (OUT/runs by default: a run finished once is never trained again), then writes OUT/<id>/ for each study.
// Progress and the ETA go to stderr; SIGINT stops after the current step of every run, resumably (run the
// same command again). Under an MPI launcher (`mpirun -np N vla study run ...`) the runs are split over the
// ranks and gathered into the root's OUT (studies/sweep_ranks.hpp); list and plan run in one process.
#include "cli/command.hpp"
#include "cli/list_option.hpp"
#include "cli/train_options.hpp"
#include "cli/training_device.hpp"
#ifdef VLA_HAVE_CUDA
#include "gpu/device_query.hpp"
#endif
#include "studies/runner.hpp"
#include "studies/sweep_ranks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <thread>

namespace {

struct Args {
  std::vector<std::string> ids;
  vla::studies::StudyOptions opt;
  std::string store;
  int threads = 0;
  int cpu_threads = 0;
  int cpu_concurrent = 1;
  int concurrent = 16;
  bool gpu_only = false;
  bool from_store = false;
};

std::string command_line(const Args& a) {
  std::string s = "vla study run";
  for (const auto& id : a.ids) s += " " + id;
  if (a.opt.quick) s += " --quick";
  if (a.gpu_only) s += " --gpu-only";
  if (a.from_store) s += " --from-store";
  if (!a.opt.recipe_pairs.empty()) s += fmt::format(" --pairs {}", fmt::join(a.opt.recipe_pairs, ","));
  s += " --device " + a.opt.device;
  if (!a.opt.seeds.empty()) s += fmt::format(" --seeds {}", fmt::join(a.opt.seeds, ","));
  s += " --out " + a.opt.out.string();
  return s;
}

void list() {
  vla::studies::StudyOptions full, quick;
  quick.quick = true;
  fmt::print("{:<28} {:>11} {:>11}  {}\n", "study", "runs (full)", "runs (quick)", "paper source / claims");
  for (const auto& s : vla::studies::study_registry()) {
    const auto pf = s.plan ? s.plan(full) : vla::studies::Plan{};
    const auto pq = s.plan ? s.plan(quick) : vla::studies::Plan{};
    fmt::print("{:<28} {:>11} {:>11}  {}{}\n", s.id, pf.runs.size(), pq.runs.size(), s.source,
               vla::studies::claims_of(s.id).empty() ? "" : fmt::format(" [claim {}]", fmt::join(vla::studies::claims_of(s.id), ", ")));
    if (!pf.blocked.empty()) fmt::print("{:<28} {:>11} {:>11}  not expressible: {}\n", "", "", "", pf.blocked.front().reason);
  }
  fmt::print("(equal runs are shared: the union over studies is smaller than the sum)\n");
}

// A count of runs at once: refused below one, naming the flag (a sweep with no worker would never end).
void require_at_least_one(int n, const char* flag) {
  if (n < 1) throw std::invalid_argument(fmt::format("{}: must be >= 1, got {}", flag, n));
}

// The runs a `vla study run` would make, where they would train, and a rough time (studies/sweep.hpp's
// model). Without the CUDA build, --device cuda plans with the GPU trainer's limits as the rules' GPU
// traits state them (core/rules/gpu_support.hpp).

void plan(const Args& a) {
  require_at_least_one(a.cpu_concurrent, "--cpu-concurrent");
  vla::studies::StudyOptions o = a.opt;
  o.store = a.store;
  std::vector<vla::train::TrainConfig> all;
  std::vector<std::string> ids = a.ids;
  if (std::find(ids.begin(), ids.end(), "all") != ids.end()) {
    ids.clear();
    for (const auto& s : vla::studies::study_registry()) ids.push_back(s.id);
  }
  const vla::studies::RunStore store(o.store_root());
  std::map<std::string, vla::train::TrainConfig> distinct;
  std::map<std::string, std::string> first_asker;  // run key -> the first study (in the order given) that asks for it
  std::size_t asked = 0;
  std::vector<std::string> training_ids;  // the studies that train runs, in the order given
  for (const auto& id : ids) {
    const auto& s = vla::studies::find_study(id, "ID");
    if (!s.plan) continue;
    training_ids.push_back(id);
    for (const auto& c : s.plan(o).runs) {
      const std::string key = vla::studies::RunStore::key(c);
      distinct.emplace(key, c);
      first_asker.emplace(key, id);
      ++asked;
    }
  }
  // What goes to the GPU: the CUDA build's own check; without CUDA in this build, the stored device's (the
  // rules' GPU traits, as the GPU trainer checks them).
#ifdef VLA_HAVE_CUDA
  const auto dev = vla::cli::training_device("cuda");
#else
  const auto dev = vla::cli::stored_device("cuda");
#endif
  const auto on_gpu = [&dev](const vla::train::TrainConfig& c) {
    try {
      dev.check(c);
      return true;
    } catch (const std::invalid_argument&) {
      return false;
    }
  };
  const int cpu_threads = a.opt.device == "cpu" ? (a.threads ? a.threads : int(std::thread::hardware_concurrency()))
                                                : (a.cpu_threads ? a.cpu_threads : 8);
  double gpu_s = 0, cpu_s = 0, steps = 0, flops = 0;
  int gpu_runs = 0, cpu_runs = 0, done = 0;
  std::map<std::string, std::pair<int, double>> by_study;  // first asker -> runs to train, their estimated seconds
  for (const auto& [key, c] : distinct) {
    const bool gpu = a.opt.device == "cuda" && on_gpu(c);
    if (a.opt.device == "cuda" && !gpu && a.gpu_only) continue;
    const bool finished = vla::studies::read_outcome(c, store.path(c, gpu ? "cuda" : "cpu")).status !=
                          vla::studies::RunOutcome::Status::Interrupted;
    if (finished) { ++done; continue; }
    steps += c.steps;
    flops += vla::studies::dense_flops(c);
    const double est = gpu ? vla::studies::estimated_seconds(c, "cuda") : vla::studies::estimated_seconds(c, "cpu", cpu_threads);
    if (gpu) { ++gpu_runs; gpu_s += est; }
    else { ++cpu_runs; cpu_s += est; }
    auto& b = by_study[first_asker.at(key)];
    ++b.first;
    b.second += est;
  }
  fmt::print("{} runs asked for by {} studies, {} distinct, {} already finished in {}\n", asked, ids.size(), distinct.size(), done,
             o.store_root().string());
  fmt::print("to train: {} runs, {:.3g} run-steps\n", gpu_runs + cpu_runs, steps);
  if (a.opt.device == "cuda") {
    // A floor while the GEMMs stay fp32 (the paper trains in float32): their flops at two H100 rates.
    fmt::print("  dense projections: {:.3g} PFLOP forward and backward: ~{:.0f} s at cuBLAS SGEMM's best rate at these shapes "
               "on an H100 ({:.0f} TFLOPS), ~{:.0f} s at its fp32 peak ({:.0f})\n",
               flops / 1e15, flops / (vla::studies::kH100SgemmTflops * 1e12), vla::studies::kH100SgemmTflops,
               flops / (vla::studies::kH100Fp32PeakTflops * 1e12), vla::studies::kH100Fp32PeakTflops);
    fmt::print("  cuda: {} runs, ~{:.0f} s at the rate measured with 16 runs at once on one H100 (more runs at once did not raise it)", gpu_runs,
               gpu_s);
    // Concurrent runs spread over every visible GPU (gpu/train/trainer.hpp): two H100s took 600 s for
    // fig6-mqar-long-context's 96 runs, planned at ~1004 s for one.
    int gpus = 0;
#ifdef VLA_HAVE_CUDA
    gpus = vla::gpu::device_count();
#endif
    if (gpus > 1) fmt::print("; ~{:.0f} s over the {} GPUs visible, with --concurrent {}", gpu_s / gpus, gpus, 16 * gpus);
    fmt::print("\n");
  }
  const int cpu_at_once = a.opt.device == "cuda" ? std::max(1, std::min(a.cpu_concurrent, cpu_runs)) : 1;
  fmt::print("  cpu: {} runs, ~{:.0f} s on {} threads per run ({}{})\n", cpu_runs, cpu_s / cpu_at_once, cpu_threads,
             cpu_at_once > 1 ? fmt::format("{} runs at a time", cpu_at_once) : "one run at a time",
             a.opt.device == "cuda" ? ", beside the GPU's" : "");
  if (training_ids.size() > 1) {  // what each study adds, so that a plan can be cut study by study
    fmt::print("  by study, in the order given (a run two studies share counts for the first; seconds as above, GPU and CPU "
               "runs summed):\n");
    for (const auto& id : training_ids) {
      const auto it = by_study.find(id);
      const std::pair<int, double> b = it == by_study.end() ? std::pair<int, double>{0, 0.0} : it->second;
      fmt::print("    {:<28} {:>4} runs  ~{:.0f} s\n", id, b.first, b.second);
    }
  }
  fmt::print("(rough: studies/sweep.hpp estimated_seconds; the sweep prints the measured ETA)\n");
}

const vla::cli::RegisterCommand reg{
    "study", "The paper's figures and tables as studies: list, run (docs/studies.md)", [](CLI::App& app) {
      app.require_subcommand(1);
      auto* l = app.add_subcommand("list", "every study: id, runs at full and quick size, the paper's source, the claims it decides");
      l->final_callback([] {
        vla::parallel::require_one_process("vla study list");
        list();
      });
      auto a = std::make_shared<Args>();
      auto* pl = app.add_subcommand("plan", "the distinct runs `run` would train (ids or all), where, and a rough time");
      pl->add_option("ids", a->ids, "study ids or all")->required();
      pl->add_flag("--quick", a->opt.quick, "plan the --quick size");
      pl->add_option("--device", a->opt.device, "cpu | cuda")->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
      vla::cli::add_list_option(*pl, "--seeds", a->opt.seeds, "seeds for every study");
      vla::cli::add_list_option(*pl, "--pairs", a->opt.recipe_pairs, "recipe-sensitivity, recipe-capacity: only these MQAR n");
      pl->add_flag("--gpu-only", a->gpu_only, "cuda: leave out the runs the GPU has no kernel for");
      pl->add_option("--out", a->opt.out, "output folder (its run store is checked for finished runs)")->capture_default_str();
      pl->add_option("--store", a->store, "run store (default OUT/runs)");
      pl->add_option("--threads", a->threads, "CPU threads (cpu device)")->capture_default_str();
      pl->add_option("--cpu-threads", a->cpu_threads, "cuda: CPU threads of the runs the GPU has no kernel for (0: 8)")->capture_default_str();
      pl->add_option("--cpu-concurrent", a->cpu_concurrent, "cuda: those CPU runs at once")->capture_default_str();
      pl->final_callback([a] {
        vla::parallel::require_one_process("vla study plan");
        plan(*a);
      });
      auto* r = app.add_subcommand("run", "run studies (ids or all): train what they need, write OUT/<id>/ (section.md, verdict.json, "
                                          "data/, plots/)");
      r->add_option("ids", a->ids, "study ids (vla study list) or all")->required();
      r->add_flag("--quick", a->opt.quick, "the CI smoke size (widths / 4, steps / 100, two seeds): NOT the paper's result");
      r->add_option("--device", a->opt.device, "cpu | cuda: where the training runs go (cuda: spread over every visible GPU; "
                                               "runs the GPU has no kernel for go to the CPU)")
          ->check(CLI::IsMember({"cpu", "cuda"}))
          ->capture_default_str();
      vla::cli::add_list_option(*r, "--seeds", a->opt.seeds, "seeds for every study (default: each study's, 42,123,999 for the paper's)");
      r->add_option("--out", a->opt.out, "output folder: OUT/<id>/ per study")->capture_default_str();
      r->add_option("--store", a->store, "run store (default OUT/runs): one folder per training run, shared by every study");
      r->add_option("--threads", a->threads, "threads of each CPU training run (0: all cores)")->capture_default_str();
      r->add_option("--concurrent", a->concurrent, "cuda: training runs at once, spread over the visible GPUs (measured on an H100: "
                                                   "more than ~12 per GPU gains nothing, the host's cores are the limit)")->capture_default_str();
      r->add_flag("--gpu-only", a->gpu_only, "cuda: runs the GPU has no kernel for are not trained on the CPU but reported as not run");
      r->add_flag("--from-store", a->from_store,
                  "train nothing: summarise from the runs finished in the store (an error names one that is not); --device names "
                  "the store's folder, so a build without CUDA reads a GPU sweep's store (reports/run-archive/)");
      vla::cli::add_list_option(*r, "--pairs", a->opt.recipe_pairs,
                                 "recipe-sensitivity, recipe-capacity: only these MQAR n (the paper's studies keep theirs)");
      r->add_option("--cpu-threads", a->cpu_threads,
                    "cuda: threads of the CPU runs that train beside the GPU's (0: half the cores)")->capture_default_str();
      r->add_option("--cpu-concurrent", a->cpu_concurrent,
                    "cuda: those CPU runs at once, --cpu-threads each (the host's cores are shared with the GPU runs' threads)")
          ->capture_default_str();
      r->final_callback([a] {
        for (const auto& id : a->ids)
          if (id != "all") vla::studies::find_study(id, "ID");
        require_at_least_one(a->concurrent, "--concurrent");
        if (a->threads < 0 || a->cpu_threads < 0) throw std::invalid_argument("--threads/--cpu-threads: must be >= 0");
        require_at_least_one(a->cpu_concurrent, "--cpu-concurrent");
        a->opt.store = a->store;
        if (a->from_store) vla::parallel::require_one_process("vla study run --from-store");
        vla::studies::SweepOptions so;
        so.device = a->from_store ? vla::cli::stored_device(a->opt.device) : vla::cli::training_device(a->opt.device);
        so.fallback = a->from_store ? vla::cli::stored_device("cpu") : vla::train::cpu_device();
        so.train = !a->from_store;
        so.concurrent = a->concurrent;
        so.fallback_concurrent = a->cpu_concurrent;
        so.use_fallback = !a->gpu_only;
        // The cores of a host are shared by its ranks: the default threads (all cores for the CPU device,
        // half of them beside the GPU) are divided among them.
        auto& ranks = vla::parallel::world();
        const int cores = int(std::max(1u, std::thread::hardware_concurrency())) / ranks.local_size();
        so.threads = a->opt.device == "cpu" ? (a->threads ? a->threads : ranks.local_size() > 1 ? std::max(1, cores) : 0)
                                            : (a->cpu_threads ? a->cpu_threads : std::max(1, cores / 2));
        so.interrupt = vla::cli::stop_on_sigint();
        so.progress = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
        so.ranks = &ranks;
        if (!ranks.root()) {
          vla::studies::serve_sweeps(vla::studies::RunStore(a->opt.store_root()), so);
          return;
        }
        const auto res = vla::studies::run_studies(a->ids, a->opt, so, command_line(*a));
        vla::studies::release_ranks(ranks);
        for (const auto& s : res.studies)
          fmt::print("{:<28} {:<9}{} {:>5} runs  -> {}/{}/section.md\n", s.id, vla::analysis::verdict_name(s.verdict),
                     s.quick ? " (quick)" : "", s.runs, a->opt.out.string(), s.id);
        fmt::print("{}: {} runs trained, {} resumed, {} taken from the store, {} diverged{}; {:.1f} s\n",
                   res.interrupted ? "stopped (run the same command again to continue)" : "done", res.trained, res.resumed,
                   res.reused, res.diverged, res.skipped ? fmt::format(", {} not run (--gpu-only)", res.skipped) : "", res.wall_s);
      });
    },
    true};

}  // namespace
