#include "studies/study.hpp"

#include "studies/run_store.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace vla::studies {

namespace {
Comparison numeric(std::string item, const PaperValue& paper, double measured, std::string tolerance, bool holds) {
  Comparison c;
  c.item = std::move(item);
  c.paper = paper.value;
  c.measured = measured;
  c.where = paper.where;
  c.tolerance = std::move(tolerance);
  c.holds = std::isfinite(measured) && holds;
  return c;
}
}  // namespace

Comparison within_abs(std::string item, const PaperValue& paper, double measured, double tol) {
  return numeric(std::move(item), paper, measured, fmt::format("|diff| <= {:g}", tol), std::abs(measured - paper.value) <= tol);
}

Comparison within_factor(std::string item, const PaperValue& paper, double measured, double f) {
  return numeric(std::move(item), paper, measured, fmt::format("within x{:g}", f), measured >= paper.value / f && measured <= paper.value * f);
}

Comparison statement(std::string item, std::string paper_text, std::string where, std::string measured_text, bool holds,
                     std::string tolerance) {
  Comparison c;
  c.item = std::move(item);
  c.paper_text = std::move(paper_text);
  c.measured_text = std::move(measured_text);
  c.where = std::move(where);
  c.tolerance = std::move(tolerance);
  c.holds = holds;
  return c;
}

Verdict verdict_of(const std::vector<Comparison>& cs) {
  int held = 0, total = 0;
  for (const auto& c : cs)
    if (!c.info) { ++total; held += c.holds; }
  if (total == 0) return Verdict::NotRun;
  return held == total ? Verdict::Holds : held == 0 ? Verdict::Fails : Verdict::Partial;
}

const RunOutcome& StudyContext::run(const train::TrainConfig& c) const {
  if (outcomes_)
    if (const auto it = outcomes_->find(RunStore::key(c)); it != outcomes_->end()) return it->second;
  throw std::logic_error(fmt::format("study {}: run {} was not in its plan", study.id, RunStore::name(c)));
}

const PaperValue& StudyContext::paper(const std::string& key) const {
  for (const auto& p : study.paper)
    if (p.key == key) return p;
  throw std::logic_error(fmt::format("study {}: no paper value declared as '{}'", study.id, key));
}

std::vector<std::string> claims_of(const std::string& study_id) {
  std::vector<std::string> ids;
  for (const auto& c : analysis::claim_registry())
    if (std::find(c.studies.begin(), c.studies.end(), study_id) != c.studies.end()) ids.push_back(c.id);
  return ids;
}

const Study& find_study(const std::string& id, const std::string& flag) {
  std::string ids;
  for (const auto& s : study_registry()) {
    if (s.id == id) return s;
    ids += (ids.empty() ? "" : ", ") + s.id;
  }
  throw std::invalid_argument(fmt::format("{}: unknown study '{}' (allowed: {}, all)", flag, id, ids));
}

}  // namespace vla::studies
