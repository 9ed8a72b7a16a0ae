// One interface for every log source the agent follows (journald, /dev/kmsg, files).
//
// A source reads, it does not interpret: it turns bytes/entries into common::LogRecord and hands
// them to the RecordHandler synchronously, on the io_context thread that runs it. Sources are
// driven by fd readiness on that io_context (sd_journal_get_fd, the kmsg fd, inotify) and never
// block it for long: work is sliced and re-posted.
//
// Checkpoints are opaque strings owned by the source. checkpoint() describes the position just
// after the last record handed to the handler (after flush(), nothing is held back), so the agent
// can persist it in the same transaction as the symptoms those records produced. Failures never
// throw: they show in health() and processing goes on.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "common/log_record.h"
#include "common/parse/literal_scan.h"
#include "common/protocol.h"

namespace faultline::agent {

using SourceHealth = common::SourceHealth;

using RecordHandler = std::function<void(common::LogRecord&& record, common::SourceKind kind)>;

class Source {
 public:
  virtual ~Source() = default;
  // Stable key of this source's checkpoint in the spool.
  virtual const std::string& name() const = 0;
  // Opens the source positioned just after `checkpoint` ("" = the configured start policy) and
  // starts waiting for data. Records reach `handler` from io_context handlers and from poll().
  virtual void start(const std::string& checkpoint, RecordHandler handler) = 0;
  // Cancels waits and closes the source; no handler runs afterwards.
  virtual void stop() = 0;
  // Reads whatever is available now, up to a slice; true when more is left to read.
  virtual bool poll() = 0;
  // Emits records held back by a multi-line parser so checkpoint() covers all delivered input.
  virtual void flush() = 0;
  virtual std::string checkpoint() const = 0;
  virtual SourceHealth health() const = 0;
  // The rules' literals, for sources that parse byte streams: their parsers search the raw
  // bytes first and hand on only records holding one (ParseOptions::literals). Before start()
  // and after a rule reload; sources that read whole records ignore it.
  virtual void useLiterals(std::shared_ptr<const common::LiteralScanner> literals) { (void)literals; }
  // The error lexicon's words (common::errorWordScanner(); null: none): such sources also hand on
  // records holding one, marked LogRecord::rule_literals_absent when they hold no rule literal
  // (ParseOptions::error_words), for the agent's template miner. Before start().
  virtual void useErrorWords(std::shared_ptr<const common::LiteralScanner> words) { (void)words; }

 protected:
  // Wraps a handler the io_context may run after this source is destroyed (a cancelled or an
  // already completed wait, a post): it then returns without touching the source (make
  // test-asan: a kmsg wait cancelled by the destructor ran later and wrote the freed source).
  template <typename F>
  auto whileAlive(F f) {
    return [alive = std::weak_ptr<char>(alive_), f = std::move(f)](auto&&... args) mutable {
      if (!alive.expired()) f(std::forward<decltype(args)>(args)...);
    };
  }

 private:
  std::shared_ptr<char> alive_ = std::make_shared<char>();
};

}  // namespace faultline::agent
