// The fuzz targets without libFuzzer: `make test` builds each target with the project's own
// compiler and links this main instead of -fsanitize=fuzzer (tests/fuzz/CMakeLists.txt), so the
// suite needs no clang sub-build. It runs every input it is given (the seeds: hand-written
// inputs, every input that once failed, the fixtures and samples), then a fixed number of
// mutants of them: truncations, byte flips, spliced and repeated spans, inserted garbage and
// line breaks. Mutants come from a generator seeded by the inputs' contents, so a run is the
// same every time; a failing mutant is written out so it can become a seed. Real fuzzing,
// instrumented and guided by coverage, is `make fuzz`.
//
//   fuzz_replay_<name> [--mutants N] [--out DIR] FILE|DIR...
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <unistd.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace {

namespace fs = std::filesystem;

// Inputs past libFuzzer's -max_len in `make fuzz` are cut the same way here.
constexpr size_t kMaxLen = 65536;

struct SplitMix {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(next() % n); }
};

uint64_t fnv1a(const std::string& s, uint64_t h) {
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (s.size() > kMaxLen) s.resize(kMaxLen);
  return s;
}

// Bytes a parser cares about: separators, brackets, digits, quotes, NUL and high bytes.
constexpr char kInteresting[] = "\n\r\t :[]{}\",=0123456789-.\\\0\xff\xc3";

std::string mutate(const std::string& in, const std::string& other, SplitMix& rng) {
  std::string s = in;
  const int steps = 1 + static_cast<int>(rng.below(4));
  for (int i = 0; i < steps; ++i) {
    const size_t at = rng.below(s.size() + 1);
    switch (rng.below(7)) {
      case 0:  // truncate
        s.resize(at);
        break;
      case 1:  // flip a bit
        if (!s.empty()) s[rng.below(s.size())] ^= static_cast<char>(1u << rng.below(8));
        break;
      case 2:  // an interesting byte in place
        if (!s.empty()) s[rng.below(s.size())] = kInteresting[rng.below(sizeof kInteresting - 1)];
        break;
      case 3: {  // insert random bytes
        std::string junk(1 + rng.below(16), '\0');
        for (auto& c : junk) c = static_cast<char>(rng.next());
        s.insert(at, junk);
        break;
      }
      case 4: {  // delete a span
        s.erase(at, rng.below(64));
        break;
      }
      case 5: {  // repeat a span of this input
        if (s.empty()) break;
        const size_t from = rng.below(s.size());
        const std::string span = s.substr(from, 1 + rng.below(256));
        s.insert(at, span);
        break;
      }
      default: {  // splice in a span of another input
        if (other.empty()) break;
        const size_t from = rng.below(other.size());
        s.insert(at, other.substr(from, 1 + rng.below(512)));
        break;
      }
    }
    if (s.size() > kMaxLen) s.resize(kMaxLen);
  }
  return s;
}

void run(const std::string& input) {
  // A copy on the heap of exactly the input's size, as libFuzzer hands it (reads past it are
  // caught by the sanitizer builds); like libFuzzer, never a null pointer, even for no bytes.
  static const uint8_t kNoBytes = 0;
  std::vector<uint8_t> buf(input.begin(), input.end());
  LLVMFuzzerTestOneInput(buf.empty() ? &kNoBytes : buf.data(), buf.size());
}

}  // namespace

int main(int argc, char** argv) {
  size_t mutants = 2000;
  fs::path out = fs::temp_directory_path();
  std::vector<fs::path> paths;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--mutants") == 0 && i + 1 < argc) {
      mutants = std::strtoull(argv[++i], nullptr, 10);
    } else if (std::strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
      out = argv[++i];
    } else {
      paths.emplace_back(argv[i]);
    }
  }
  std::vector<fs::path> files;
  for (const auto& p : paths) {
    if (fs::is_directory(p)) {
      for (const auto& e : fs::recursive_directory_iterator(p))
        if (e.is_regular_file()) files.push_back(e.path());
    } else if (fs::is_regular_file(p)) {
      files.push_back(p);
    } else {
      std::fprintf(stderr, "fuzz replay: %s: no such file or directory\n", p.c_str());
      return 2;
    }
  }
  std::sort(files.begin(), files.end());  // the same order (and so the same mutants) every run
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);

  std::vector<std::string> inputs;
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const auto& f : files) {
    inputs.push_back(slurp(f));
    h = fnv1a(inputs.back(), h);
    run(inputs.back());
  }
  run(std::string());  // the empty input
  if (inputs.empty()) inputs.emplace_back();

  SplitMix rng{h};
  size_t bytes = 0;
  const fs::path pending = out / ("fuzz-replay-" + std::to_string(::getpid()) + ".input");
  std::printf("fuzz replay: %zu inputs passed; %zu mutants next, each written to %s while it runs\n", files.size(),
              mutants, pending.c_str());
  std::fflush(stdout);
  for (size_t i = 0; i < mutants; ++i) {
    const std::string& base = inputs[rng.below(inputs.size())];
    const std::string& other = inputs[rng.below(inputs.size())];
    const std::string m = mutate(base, other, rng);
    // Written before the run and removed after it: when a mutant aborts, the file is what failed.
    {
      std::ofstream f(pending, std::ios::binary | std::ios::trunc);
      f.write(m.data(), static_cast<std::streamsize>(m.size()));
    }
    run(m);
    bytes += m.size();
  }
  std::error_code ec;
  fs::remove(pending, ec);
  std::printf("fuzz replay: %zu inputs, %zu mutants (%zu bytes), all passed\n", files.size(), mutants, bytes);
  return 0;
}
