#include "util/log.hpp"

#include <atomic>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "cairn/cairn.h"

namespace cairn::util {
namespace {

struct Seen {
  std::vector<std::pair<LogLevel, std::string>> messages;
};

// Every test leaves the default function behind it.
class LogTest : public ::testing::Test {
 protected:
  void TearDown() override { SetLog(nullptr); }
};

TEST_F(LogTest, TheFunctionGetsTheLevelAndTheFormattedMessage) {
  Seen seen;
  SetLog([&](LogLevel level, std::string_view m) { seen.messages.emplace_back(level, std::string(m)); });
  Log(LogLevel::kWarn, "rank %d: %s", 3, "restored v7 from L2");
  Log(LogLevel::kInfo, "plain");
  ASSERT_EQ(seen.messages.size(), 2u);
  EXPECT_EQ(seen.messages[0].first, LogLevel::kWarn);
  EXPECT_EQ(seen.messages[0].second, "rank 3: restored v7 from L2");
  EXPECT_EQ(seen.messages[1].first, LogLevel::kInfo);
  EXPECT_EQ(seen.messages[1].second, "plain");
}

TEST_F(LogTest, ALongMessageIsCutNotOverrun) {
  Seen seen;
  SetLog([&](LogLevel level, std::string_view m) { seen.messages.emplace_back(level, std::string(m)); });
  const std::string big(5000, 'x');
  Log(LogLevel::kError, "%s", big.c_str());
  ASSERT_EQ(seen.messages.size(), 1u);
  EXPECT_EQ(seen.messages[0].second, std::string(1023, 'x'));
}

TEST_F(LogTest, AReplacedFunctionIsNotCalledAgain) {
  int first = 0, second = 0;
  SetLog([&](LogLevel, std::string_view) { ++first; });
  Log(LogLevel::kInfo, "one");
  SetLog([&](LogLevel, std::string_view) { ++second; });
  Log(LogLevel::kInfo, "two");
  EXPECT_EQ(first, 1);
  EXPECT_EQ(second, 1);
}

TEST_F(LogTest, AThrowingFunctionDoesNotThrowOutOfLog) {
  SetLog([](LogLevel, std::string_view) { throw std::runtime_error("application's bug"); });
  EXPECT_NO_THROW(Log(LogLevel::kWarn, "falls back to stderr"));
}

TEST_F(LogTest, ThreadsLogConcurrentlyAndEveryMessageArrives) {
  std::atomic<int> count{0};
  SetLog([&](LogLevel, std::string_view m) {
    if (m == "from a thread") count.fetch_add(1);
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([] {
      for (int i = 0; i < 250; ++i) Log(LogLevel::kInfo, "from a thread");
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(count.load(), 1000);
}

// The C form: a plain function and a user pointer, a NUL-terminated message,
// the C level; NULL gives the default back.
struct CSeen {
  int calls = 0;
  int level = -1;
  std::string message;
};
extern "C" void RecordC(void* user, cairn_log_level_t level, const char* message) {
  auto* seen = static_cast<CSeen*>(user);
  ++seen->calls;
  seen->level = level;
  seen->message = message;
}

TEST_F(LogTest, TheCApiRoutesMessagesToAFunctionAndUserPointer) {
  CSeen seen;
  cairn_set_log_fn(&RecordC, &seen);
  Log(LogLevel::kError, "device prefetch of '%s' failed", "field");
  EXPECT_EQ(seen.calls, 1);
  EXPECT_EQ(seen.level, CAIRN_LOG_ERROR);
  EXPECT_EQ(seen.message, "device prefetch of 'field' failed");
  cairn_set_log_fn(nullptr, nullptr);
  Log(LogLevel::kInfo, "to stderr");
  EXPECT_EQ(seen.calls, 1) << "NULL restores the default";
}

static_assert(static_cast<int>(LogLevel::kError) == CAIRN_LOG_ERROR);
static_assert(static_cast<int>(LogLevel::kWarn) == CAIRN_LOG_WARN);
static_assert(static_cast<int>(LogLevel::kInfo) == CAIRN_LOG_INFO);

}  // namespace
}  // namespace cairn::util
