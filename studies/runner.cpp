#include "studies/runner.hpp"

#include "studies/outputs.hpp"

#include <filesystem>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <set>

namespace vla::studies {

namespace {

double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Whether a study's outputs at this size exist (its verdict.json, quick or not as o.quick).
bool has_outputs(const StudyOptions& o, const std::string& id) {
  const auto f = o.out / id / "verdict.json";
  return std::filesystem::exists(f) && read_json(f).value("quick", false) == (o.quick && find_study(id).sized);
}

// The selected studies and the studies they read whose outputs at this size are missing, in waves: a
// study comes in the wave after every study it reads (registry order within a wave).
std::vector<std::vector<const Study*>> waves(const std::vector<std::string>& ids, const StudyOptions& o) {
  std::set<std::string> want;
  std::vector<std::string> todo = ids;
  if (std::find(ids.begin(), ids.end(), "all") != ids.end()) {
    todo.clear();
    for (const auto& s : study_registry()) todo.push_back(s.id);
  }
  for (const auto& id : todo) want.insert(find_study(id).id);
  while (!todo.empty()) {
    const std::string id = todo.back();
    todo.pop_back();
    for (const auto& a : find_study(id).after)
      if (!want.count(a) && !has_outputs(o, a)) {
        want.insert(a);
        todo.push_back(a);
      }
  }
  std::vector<std::vector<const Study*>> w;
  std::set<std::string> placed;
  while (placed.size() < want.size()) {
    std::vector<const Study*> wave;
    for (const auto& s : study_registry())
      if (want.count(s.id) && !placed.count(s.id) &&
          std::all_of(s.after.begin(), s.after.end(), [&](const std::string& a) { return placed.count(a) > 0 || !want.count(a); }))
        wave.push_back(&s);
    if (wave.empty()) throw std::logic_error("studies: a cycle in the studies' `after` lists");
    for (const auto* s : wave) placed.insert(s->id);
    w.push_back(wave);
  }
  return w;
}

}  // namespace

RunnerResult run_studies(const std::vector<std::string>& ids, const StudyOptions& o, const SweepOptions& so, const std::string& command) {
  const auto t0 = std::chrono::steady_clock::now();
  RunnerResult res;
  const RunStore store(o.store_root());
  for (const auto& wave : waves(ids, o)) {
    // Plan every study of the wave, then one sweep over the union of their runs.
    std::vector<Plan> plans;
    std::vector<train::TrainConfig> all;
    for (const auto* s : wave) {
      plans.push_back(s->plan ? s->plan(o) : Plan{});
      all.insert(all.end(), plans.back().runs.begin(), plans.back().runs.end());
    }
    const SweepResult sw = sweep(all, store, so);
    res.reused += sw.reused;
    res.resumed += sw.resumed;
    res.trained += sw.trained;
    res.diverged += sw.diverged;
    res.skipped += sw.skipped;
    if (sw.interrupted) {
      res.interrupted = true;
      break;
    }
    for (std::size_t i = 0; i < wave.size(); ++i) {
      const Study& s = *wave[i];
      const auto ts = std::chrono::steady_clock::now();
      StudyRecord rec;
      rec.plan = plans[i];
      for (const auto& c : rec.plan.runs) rec.outcomes.push_back(sw.outcomes.at(RunStore::key(c)));
      rec.device = so.device.name;
      rec.sweep_wall_s = sw.wall_s;
      rec.from_store = sw.trained == 0 && sw.resumed == 0;
      rec.command = command;
      StudyContext ctx(s, o, o.out / s.id, &sw.outcomes, o.store_root());
      std::filesystem::create_directories(ctx.data_dir());
      std::filesystem::create_directories(ctx.plot_dir());
      Section sec;
      s.summarise(ctx, sec);
      rec.summary_s = since(ts);
      write_study(s, o, sec, rec);
      const bool quick = o.quick && s.sized;
      res.studies.push_back({s.id, sec.verdict, quick, int(rec.plan.runs.size()), rec.summary_s});
      if (so.progress)
        so.progress(fmt::format("study {}: {}{} ({} runs, summary {:.1f} s) -> {}", s.id, analysis::verdict_name(sec.verdict),
                                quick ? " (quick)" : "", rec.plan.runs.size(), rec.summary_s, (ctx.dir / "section.md").string()));
    }
  }
  res.wall_s = since(t0);
  return res;
}

}  // namespace vla::studies
