#pragma once
// Running studies: plan every selected study (and the studies they read, `after`, when their outputs at
// this size are missing), train the union of
// their runs in one sweep (studies/sweep.hpp: equal configs are one run), then summarise each study and
// write its folder (studies/outputs.hpp). Studies that read another study's outputs (the capacity study
// at the best recipe reads the recipe study's) are planned after it, in a second sweep. A sweep stopped
// by SIGINT writes no summary: running the same command again continues where it stopped.
#include "studies/study.hpp"
#include "studies/sweep.hpp"

#include <string>
#include <vector>

namespace vla::studies {

struct StudyDone {
  std::string id;
  Verdict verdict = Verdict::NotRun;
  bool quick = false;  // from a --quick run of a sized study
  int runs = 0;
  double seconds = 0;
};

struct RunnerResult {
  std::vector<StudyDone> studies;
  int reused = 0, resumed = 0, trained = 0, diverged = 0, skipped = 0;
  bool interrupted = false;
  double wall_s = 0;
};

// ids: study ids or "all". command: how this was invoked (recorded in every output).
RunnerResult run_studies(const std::vector<std::string>& ids, const StudyOptions& o, const SweepOptions& so,
                         const std::string& command);

}  // namespace vla::studies
