// What flambeau-gpt shows and writes while training: a live progress line, a JSON-lines
// log (one record per step, one per validation), and an SVG plot of the loss curves.
#pragma once
#include <chrono>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace gpt {

// One line on stderr rewritten in place (a TTY), or a plain line every `every` steps.
class Progress {
 public:
  Progress(int64_t first_step, int64_t last_step, int64_t every);
  // After step `step` (0-based) of tokens_per_step tokens.
  void update(int64_t step, double loss, double lr, int64_t tokens_per_step);
  void note(const std::string& line);  // a message on its own line
  void finish();
  double tokens_per_second() const { return tps_; }

 private:
  using Clock = std::chrono::steady_clock;
  int64_t first_, last_, every_;
  bool tty_;
  Clock::time_point start_;
  double tps_ = 0;
};

struct LogRecord {
  int64_t step = 0;
  double loss = -1, val_loss = -1, lr = 0, tokens_per_s = 0;  // -1: absent
};

// The JSON-lines log. Opening for a run that resumes at `keep_until` keeps only the records
// of steps before it (a crash may have logged steps the checkpoint does not hold).
class Log {
 public:
  Log(const std::string& path, int64_t keep_until);
  void write(const LogRecord& r);
  const std::vector<LogRecord>& records() const { return records_; }

 private:
  std::string path_;
  std::ofstream out_;
  std::vector<LogRecord> records_;
};

// Exponential moving average of `values` with decay `beta`, bias-corrected as Adam's moments:
// m_t = beta m_(t-1) + (1 - beta) x_t from m_0 = 0, returned as m_t / (1 - beta^t), so the
// first points average the values seen so far instead of lagging behind them.
std::vector<double> smooth_ema(const std::vector<double>& values, double beta);

// Training loss (raw, faint, and smoothed with smooth_ema) and validation loss against the
// step, with the byte-unigram entropy as a dashed reference line; `val_label` names the
// validation curve in the legend. Written atomically.
void write_loss_svg(const std::string& path, const std::vector<LogRecord>& records, double unigram_nats,
                    const std::string& val_label = "validation");

// Writes `text` to `path` through a temporary file and a rename.
void write_file_atomic(const std::string& path, const std::string& text);

}  // namespace gpt
