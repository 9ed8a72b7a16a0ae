// Search-the-buffer-first: every rule's prefilter literals, compiled once into one Vectorscan
// (Hyperscan API) streaming database, searched over the raw bytes a parser is fed, before any
// line is parsed. A record whose lines hold no literal cannot be matched by any rule (the rule
// engine needs one of a rule's literals in the record's text), so a parser given a LiteralScanner
// (ParseOptions::literals) still parses every line — time stamps, joining, boot ids, years and
// the coverage counters stay exactly what they were — but hands on only the records that contain
// a hit (see LineParser::emit).
//
// Why a hit in the raw bytes covers every hit in a record's text: the parsers only remove bytes
// (time stamps, prefixes, indentation), join lines with '\n' (no literal holds a control byte),
// or rewrite them. The rewrites are covered by trigger literals that make a line a candidate
// whatever it says: ESC (checkText drops ANSI colour sequences, joining the bytes around them),
// '\' (kmsg "\xNN" and JSON escapes) and "MESSAGE":[ (a journal JSON message given as bytes).
// Bytes checkText replaces by '?' and rsyslog's "#ooo" escapes only ever produce '?' or control
// bytes; build() refuses literals holding those. The IPMI SEL parser rewrites its field
// separators and so hands on every record.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

struct hs_database;
struct hs_scratch;
struct hs_stream;

namespace faultline::common {

class LiteralScanner {
 public:
  // Compiles the literals; literal i gets id i (pass them distinct and non-empty). Null with
  // *error set when a literal cannot be used (empty, a control byte or '?' in it) or Vectorscan
  // refuses the set.
  static std::shared_ptr<const LiteralScanner> build(const std::vector<std::string>& literals,
                                                     std::string* error);

  // The same search over regular expressions (Vectorscan syntax, '^' at every line start),
  // expression i with id i, each caseless or not: the error lexicon's words at a word start
  // (ParseOptions::error_words), which no literal can say. literals() returns the expressions.
  // Not for the rules' literals: nothing here checks that a hit in the bytes is one in the text.
  struct Expression {
    std::string regex;
    bool caseless = false;
  };
  static std::shared_ptr<const LiteralScanner> buildExpressions(const std::vector<Expression>& expressions,
                                                                std::string* error);
  ~LiteralScanner();
  LiteralScanner(const LiteralScanner&) = delete;
  LiteralScanner& operator=(const LiteralScanner&) = delete;

  size_t literalCount() const { return count_; }
  // Unique per scanner in this process: which numbering a list of literal ids is in.
  uint64_t serial() const { return serial_; }
  // The literals it was built from (literal i has id i).
  const std::vector<std::string>& literals() const { return literals_; }

  // The compiled database (hs_serialize_database) as one blob, so a rule cache can skip the
  // compile at start-up; fromSerialized() takes the same literals and that blob back. Null with
  // *error set when the blob is not one (truncated, another Vectorscan version or platform):
  // then build() again.
  std::string serialize() const;
  static std::shared_ptr<const LiteralScanner> fromSerialized(const std::vector<std::string>& literals,
                                                              std::string_view blob, std::string* error);
  // One string searched on its own (a stream opened and closed): the ids of the literals that
  // occur in it (each once, ascending; triggers not included). False when the search failed (then
  // *ids is meaningless).
  bool literalsIn(std::string_view text, std::vector<int>* ids) const;

  // The search state of one stream (one per parser; not thread-safe). Hits are appended to `hits`
  // in scan() as hitAt(end, id): end = bytes from the stream's start, one past the literal's last
  // byte; id = the literal's id, or literalCount() + k for the k-th trigger. Sorted by end.
  class Stream {
   public:
    // Which trigger literals count as hits: ESC always; '\' and "MESSAGE":[ only where the
    // format has escapes (kmsg, journal JSON).
    enum Triggers : unsigned { kEsc = 1, kBackslash = 2, kJsonBytes = 4 };
    static constexpr unsigned kIdBits = 16;  // build() refuses more literals than that holds
    static uint64_t hitAt(uint64_t end, unsigned id) { return end << kIdBits | id; }
    static uint64_t hitEnd(uint64_t hit) { return hit >> kIdBits; }
    static unsigned hitId(uint64_t hit) { return static_cast<unsigned>(hit & ((1u << kIdBits) - 1)); }
    Stream(std::shared_ptr<const LiteralScanner> scanner, unsigned triggers);
    ~Stream();
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;
    // False once the search failed (no stream, a scan error): from then on nothing it says can
    // be trusted and the caller must treat every line as a candidate.
    bool ok() const { return stream_ != nullptr && scratch_ != nullptr && !broken_; }
    bool scan(std::string_view bytes, std::vector<uint64_t>* hits);
    void close(std::vector<uint64_t>* hits);

   private:
    std::shared_ptr<const LiteralScanner> scanner_;
    unsigned triggers_;
    std::vector<uint64_t>* out_ = nullptr;
    static int onHit(unsigned id, unsigned long long from, unsigned long long to, unsigned flags, void* ctx);
    // The one-byte triggers, by memchr (bytes start at stream offset base).
    void findByteTriggers(std::string_view bytes, uint64_t base, std::vector<uint64_t>* hits) const;
    uint64_t scanned_ = 0;  // bytes fed to scan() so far
    hs_stream* stream_ = nullptr;
    hs_scratch* scratch_ = nullptr;
    bool broken_ = false;
  };

 private:
  LiteralScanner() = default;
  hs_database* stream_db_ = nullptr;
  hs_scratch* proto_scratch_ = nullptr;  // cloned per Stream / per thread
  size_t count_ = 0;
  std::vector<std::string> literals_;
  uint64_t serial_ = 0;  // unique per scanner (per-thread scratch bookkeeping)
};

}  // namespace faultline::common
