// The progress line, the JSON-lines log and the SVG loss plot.
#include "report.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

namespace gpt {

Progress::Progress(int64_t first_step, int64_t last_step, int64_t every)
    : first_(first_step), last_(last_step), every_(every), tty_(::isatty(STDERR_FILENO)), start_(Clock::now()) {}

void Progress::update(int64_t step, double loss, double lr, int64_t tokens_per_step) {
  const double secs = std::chrono::duration<double>(Clock::now() - start_).count();
  const int64_t done = step + 1 - first_, total = last_ - first_;
  tps_ = secs > 0 ? double(done * tokens_per_step) / secs : 0;
  const double eta = done > 0 ? secs / double(done) * double(total - done) : 0;
  const int width = 24, filled = total > 0 ? int(width * done / total) : width;
  char line[256];
  std::snprintf(line, sizeof line, "[%s%s] step %lld/%lld  loss %.4f  lr %.2e  %.0f tok/s  ETA %dm%02ds",
                std::string(size_t(filled), '#').c_str(), std::string(size_t(width - filled), '.').c_str(),
                (long long)(step + 1), (long long)last_, loss, lr, tps_, int(eta) / 60, int(eta) % 60);
  if (tty_) std::fprintf(stderr, "\r%s\033[K", line);
  else if ((step + 1) % every_ == 0 || step + 1 == last_) std::fprintf(stderr, "%s\n", line);
  std::fflush(stderr);
}

void Progress::note(const std::string& line) {
  std::fprintf(stderr, tty_ ? "\r%s\033[K\n" : "%s\n", line.c_str());
  std::fflush(stderr);
}

void Progress::finish() {
  if (tty_) std::fprintf(stderr, "\n");
}

namespace {

nlohmann::json to_json(const LogRecord& r) {
  nlohmann::json j = {{"step", r.step}};
  if (r.loss >= 0) j.update({{"loss", r.loss}, {"lr", r.lr}, {"tokens_per_s", r.tokens_per_s}});
  if (r.val_loss >= 0) j["val_loss"] = r.val_loss;
  return j;
}

}  // namespace

Log::Log(const std::string& path, int64_t keep_until) : path_(path) {
  std::ifstream in(path);
  std::string line, kept;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("step") || j["step"].get<int64_t>() >= keep_until) continue;
    LogRecord r;
    r.step = j["step"];
    r.loss = j.value("loss", -1.0), r.val_loss = j.value("val_loss", -1.0);
    r.lr = j.value("lr", 0.0), r.tokens_per_s = j.value("tokens_per_s", 0.0);
    records_.push_back(r);
    kept += line + "\n";
  }
  write_file_atomic(path, kept);
  out_.open(path, std::ios::app);
  if (!out_) throw std::runtime_error("cannot write the log '" + path + "'");
}

void Log::write(const LogRecord& r) {
  records_.push_back(r);
  out_ << to_json(r).dump() << "\n";
  out_.flush();
}

void write_file_atomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) throw std::runtime_error("cannot write '" + tmp + "'");
  }
  std::filesystem::rename(tmp, path);
}

std::vector<double> smooth_ema(const std::vector<double>& values, double beta) {
  std::vector<double> out;
  out.reserve(values.size());
  double m = 0, beta_t = 1;  // beta_t = beta^t
  for (double x : values) {
    m = beta * m + (1 - beta) * x;
    beta_t *= beta;
    out.push_back(m / (1 - beta_t));
  }
  return out;
}

void write_loss_svg(const std::string& path, const std::vector<LogRecord>& records, double unigram_nats,
                    const std::string& val_label) {
  std::vector<std::pair<double, double>> train, smooth, val;
  std::vector<double> losses;
  for (const LogRecord& r : records) {
    if (r.loss >= 0) train.emplace_back(double(r.step), r.loss), losses.push_back(r.loss);
    if (r.val_loss >= 0) val.emplace_back(double(r.step), r.val_loss);
  }
  const std::vector<double> ema = smooth_ema(losses, 0.95);
  for (size_t i = 0; i < train.size(); ++i) smooth.emplace_back(train[i].first, ema[i]);
  const double W = 800, H = 480, left = 70, right = 20, top = 40, bottom = 50;
  double x_max = 1, y_max = unigram_nats * 1.15, y_min = 0;
  for (const auto& v : {train, val})
    for (const auto& [x, y] : v) x_max = std::max(x_max, x), y_max = std::max(y_max, std::min(y, 8.0));
  auto px = [&](double x) { return left + (W - left - right) * x / x_max; };
  auto py = [&](double y) { return top + (H - top - bottom) * (1 - (std::min(y, y_max) - y_min) / (y_max - y_min)); };
  std::ostringstream s;
  s << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << H
    << "' font-family='sans-serif' font-size='12'>\n<rect width='100%' height='100%' fill='white'/>\n"
    << "<text x='" << W / 2 << "' y='22' text-anchor='middle' font-size='15'>flambeau-gpt: loss (nats per byte)</text>\n";
  for (int i = 0; i <= 5; ++i) {  // grid and tick labels
    const double y = y_min + (y_max - y_min) * i / 5, x = x_max * i / 5;
    s << "<line x1='" << left << "' x2='" << W - right << "' y1='" << py(y) << "' y2='" << py(y)
      << "' stroke='#e4e4e4'/><text x='" << left - 8 << "' y='" << py(y) + 4 << "' text-anchor='end'>"
      << std::round(y * 100) / 100 << "</text>\n<text x='" << px(x) << "' y='" << H - bottom + 18
      << "' text-anchor='middle'>" << std::llround(x) << "</text>\n";
  }
  s << "<text x='" << W / 2 << "' y='" << H - 12 << "' text-anchor='middle'>step</text>\n";
  auto polyline = [&](const std::vector<std::pair<double, double>>& pts, const char* style) {
    s << "<polyline fill='none' " << style << " points='";
    for (const auto& [x, y] : pts) s << px(x) << "," << py(y) << " ";
    s << "'/>\n";
  };
  polyline(train, "stroke='#9ecae1' stroke-width='1'");
  polyline(smooth, "stroke='#08519c' stroke-width='2'");
  polyline(val, "stroke='#d94801' stroke-width='2'");
  for (const auto& [x, y] : val) s << "<circle cx='" << px(x) << "' cy='" << py(y) << "' r='3' fill='#d94801'/>\n";
  s << "<line x1='" << left << "' x2='" << W - right << "' y1='" << py(unigram_nats) << "' y2='" << py(unigram_nats)
    << "' stroke='#636363' stroke-dasharray='6,4'/>\n";
  const double lx = W - right - 230;
  const std::string names[] = {"train (smoothed)", val_label, "byte-unigram entropy"};
  const char* colors[] = {"#08519c", "#d94801", "#636363"};
  for (int i = 0; i < 3; ++i)
    s << "<line x1='" << lx << "' x2='" << lx + 24 << "' y1='" << top + 14 + 18 * i << "' y2='" << top + 14 + 18 * i
      << "' stroke='" << colors[i] << "' stroke-width='2'/><text x='" << lx + 30 << "' y='" << top + 18 + 18 * i
      << "'>" << names[i] << "</text>\n";
  s << "</svg>\n";
  write_file_atomic(path, s.str());
}

}  // namespace gpt
