// `vla study list` and `vla study run ID...|all`: the paper's figures and tables as studies
// (studies/study.hpp, docs/studies.md). A run trains what its studies need through the shared run store
// (OUT/runs by default: a run finished once is never trained again), then writes OUT/<id>/ for each study.
// Progress and the ETA go to stderr; SIGINT stops after the current step of every run, resumably (run the
// same command again).
#include "cli/command.hpp"
#include "cli/train_options.hpp"
#include "cli/training_device.hpp"
#include "studies/runner.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <thread>

namespace {

struct Args {
  std::vector<std::string> ids;
  vla::studies::StudyOptions opt;
  std::string store;
  int threads = 0;
  int cpu_threads = 0;
  int concurrent = 32;
};

std::string command_line(const Args& a) {
  std::string s = "vla study run";
  for (const auto& id : a.ids) s += " " + id;
  if (a.opt.quick) s += " --quick";
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

const vla::cli::RegisterCommand reg{
    "study", "The paper's figures and tables as studies: list, run (docs/studies.md)", [](CLI::App& app) {
      app.require_subcommand(1);
      auto* l = app.add_subcommand("list", "every study: id, runs at full and quick size, the paper's source, the claims it decides");
      l->final_callback([] { list(); });
      auto a = std::make_shared<Args>();
      auto* r = app.add_subcommand("run", "run studies (ids or all): train what they need, write OUT/<id>/ (section.md, verdict.json, "
                                          "data/, plots/)");
      r->add_option("ids", a->ids, "study ids (vla study list) or all")->required();
      r->add_flag("--quick", a->opt.quick, "the CI smoke size (widths / 4, steps / 100, two seeds): NOT the paper's result");
      r->add_option("--device", a->opt.device, "cpu | cuda: where the training runs go (runs the GPU has no kernel for go to the CPU)")
          ->capture_default_str();
      r->add_option("--seeds", a->opt.seeds, "seeds for every study (default: each study's, 42,123,999 for the paper's)")->delimiter(',');
      r->add_option("--out", a->opt.out, "output folder: OUT/<id>/ per study")->capture_default_str();
      r->add_option("--store", a->store, "run store (default OUT/runs): one folder per training run, shared by every study");
      r->add_option("--threads", a->threads, "threads of each CPU training run (0: all cores)")->capture_default_str();
      r->add_option("--concurrent", a->concurrent, "cuda: training runs at once on the GPU")->capture_default_str();
      r->add_option("--cpu-threads", a->cpu_threads,
                    "cuda: threads of the CPU runs that train beside the GPU's (0: half the cores)")->capture_default_str();
      r->final_callback([a] {
        for (const auto& id : a->ids)
          if (id != "all") vla::studies::find_study(id, "ID");
        if (a->concurrent < 1) throw std::invalid_argument(fmt::format("--concurrent: must be >= 1, got {}", a->concurrent));
        if (a->threads < 0 || a->cpu_threads < 0) throw std::invalid_argument("--threads/--cpu-threads: must be >= 0");
        a->opt.store = a->store;
        vla::studies::SweepOptions so;
        so.device = vla::cli::training_device(a->opt.device);
        so.fallback = vla::train::cpu_device();
        so.concurrent = a->concurrent;
        so.threads = a->opt.device == "cpu" ? a->threads
                                            : (a->cpu_threads ? a->cpu_threads : int(std::max(1u, std::thread::hardware_concurrency() / 2)));
        so.interrupt = vla::cli::stop_on_sigint();
        so.progress = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
        const auto res = vla::studies::run_studies(a->ids, a->opt, so, command_line(*a));
        for (const auto& s : res.studies)
          fmt::print("{:<28} {:<9}{} {:>5} runs  -> {}/{}/section.md\n", s.id, vla::analysis::verdict_name(s.verdict),
                     s.quick ? " (quick)" : "", s.runs, a->opt.out.string(), s.id);
        fmt::print("{}: {} runs trained, {} resumed, {} taken from the store, {} diverged; {:.1f} s\n",
                   res.interrupted ? "stopped (run the same command again to continue)" : "done", res.trained, res.resumed,
                   res.reused, res.diverged, res.wall_s);
      });
    }};

}  // namespace
