// The synthetic tasks' token layouts (core/train/tasks.hpp). A failure means the model trains on a
// task other than the one the docs and the studies describe.
#include "core/train/tasks.hpp"
#include "core/train/train_config.hpp"

#include <catch2/catch.hpp>

#include <set>
#include <stdexcept>

using namespace vla::train;

TEST_CASE("MQAR long context: the pairs and queries of T = 3n + 1, filler between, loss only at the queries", "[train]") {
  // If this fails, Fig. 6's sequences are not "the n = 8 task with a growing gap": the pairs or the
  // queries differ from the short layout's, filler carries a loss, or a key appears among the filler.
  TaskConfig shortc, longc;
  shortc.pairs = longc.pairs = 8;
  longc.seq_len = 64;
  REQUIRE(shortc.length() == 25);
  REQUIRE(longc.length() == 64);
  const Batch s = make_batch(shortc, 4, 7), l = make_batch(longc, 4, 7);
  const int n = 8, gap = 64 - 25;
  for (int b = 0; b < 4; ++b) {
    const auto &ts = s.tokens[b], &tl = l.tokens[b];
    REQUIRE(tl.size() == 64);
    for (int i = 0; i < 2 * n; ++i) CHECK(tl[i] == ts[i]);  // the same pairs
    for (int j = 0; j < gap; ++j) {
      CHECK(tl[2 * n + j] >= kValueLo);  // filler: value tokens, never a key or the separator
      CHECK(tl[2 * n + j] <= kValueHi);
      CHECK(l.targets[b][2 * n + j] == -1);
    }
    CHECK(tl[2 * n + gap] == kSeparator);
    for (int i = 0; i <= n; ++i) {  // the separator and the same queries in the same order, with their targets
      CHECK(tl[2 * n + gap + i] == ts[2 * n + i]);
      CHECK(l.targets[b][2 * n + gap + i] == s.targets[b][2 * n + i]);
    }
    for (int i = 0; i < 2 * n; ++i) CHECK(l.targets[b][i] == -1);
  }
}

TEST_CASE("MQAR --seq-len below 3n + 1 is refused, and a long-context config round-trips through JSON", "[train]") {
  // If this fails, a run could be resumed (or looked up in a study's run store) as another T.
  TaskConfig t;
  t.pairs = 8;
  t.seq_len = 24;
  CHECK_THROWS_AS(t.validate(), std::invalid_argument);
  TrainConfig c;
  c.task.pairs = 8;
  c.task.seq_len = 128;
  c.model.max_len = 128;
  const TrainConfig back = TrainConfig::from_json(c.to_json());
  CHECK(back.task.length() == 128);
  CHECK(back.to_json() == c.to_json());
  c.task.seq_len = 0;  // the default layout keeps its stored form, T = 3n + 1
  CHECK(TrainConfig::from_json(c.to_json()).task.seq_len == 0);
  CHECK(c.to_json()["seq_len"] == 25);
}
