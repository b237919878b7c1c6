#include "engine/trace.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "cairn/cairn.hpp"
#include "testing/test_util.hpp"

namespace cairn::core {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

TEST(Tracer, DisabledWritesNothing) {
  test::TempDir dir("trace-off");
  Tracer t("", os::FileSystem::Default());
  EXPECT_FALSE(t.enabled());
  t.Span("x", "app", Tracer::Clock::now(), Tracer::Clock::now(), 1);
  ASSERT_TRUE(t.Write().ok());
  EXPECT_TRUE(test::Files(dir.path()).empty());
}

TEST(Tracer, WritesTraceEventsWithEscapedNames) {
  test::TempDir dir("trace-on");
  const std::string path = dir.path() + "/t.json";
  Tracer t(path, os::FileSystem::Default());
  t.NameThread("app \"main\"");
  auto t0 = Tracer::Clock::now();
  t.Span("flush", "local", t0, t0 + std::chrono::milliseconds(3), 4096, "we\"ird\n", 7);
  t.Instant("evict", "cache", 512, "sim");
  t.Counter("host cache", 100, 40);
  ASSERT_TRUE(t.Write().ok());
  const std::string s = ReadAll(path);
  EXPECT_EQ(s.rfind("{\"displayTimeUnit\"", 0), 0u) << s;
  EXPECT_NE(s.find("\"traceEvents\":["), std::string::npos);
  EXPECT_NE(s.find("\"ph\":\"X\",\"name\":\"flush\",\"cat\":\"local\""), std::string::npos) << s;
  EXPECT_NE(s.find("\"dur\":3000."), std::string::npos) << s;  // microseconds
  EXPECT_NE(s.find("\"bytes\":4096,\"entry\":\"we\\\"ird\\u000a\",\"number\":7"), std::string::npos) << s;
  EXPECT_NE(s.find("\"ph\":\"i\",\"name\":\"evict\""), std::string::npos);
  EXPECT_NE(s.find("\"used_bytes\":100,\"dirty_bytes\":40"), std::string::npos);
  EXPECT_NE(s.find("\"name\":\"app \\\"main\\\"\""), std::string::npos) << s;
  EXPECT_EQ(Count(s, "{\"ph\""), 4u);
  EXPECT_EQ(s.substr(s.size() - 4), "\n]}\n");
  // Idempotent, and later events are not recorded.
  t.Instant("late", "cache", 1);
  ASSERT_TRUE(t.Write().ok());
  EXPECT_EQ(ReadAll(path), s);
}

TEST(Tracer, BoundedMemoryCountsDroppedEvents) {
  test::TempDir dir("trace-bound");
  const std::string path = dir.path() + "/t.json";
  Tracer t(path, os::FileSystem::Default(), /*max_events=*/3);
  for (int i = 0; i < 10; ++i) t.Instant("e", "cache", i);
  EXPECT_EQ(t.dropped(), 7u);
  ASSERT_TRUE(t.Write().ok());
  const std::string s = ReadAll(path);
  EXPECT_EQ(Count(s, "\"name\":\"e\""), 3u);
  EXPECT_NE(s.find("\"dropped_events\":7"), std::string::npos);
}

TEST(Tracer, ClientWritesTheTimelineAtClose) {
  test::TempDir dir("trace-client");
  Config c = test::ScratchConfig(dir.path(), 1 << 20, 64 << 10);
  c.trace_path = dir.path() + "/timeline.json";
  auto client = Client::Open(c);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  std::vector<uint8_t> region(300 << 10, 7);
  ASSERT_TRUE((*client)->Protect(0, region.data(), region.size()).ok());
  ASSERT_TRUE((*client)->Checkpoint("sim", 1).ok());
  ASSERT_TRUE((*client)->Wait("sim", 1, Level::kLocal).ok());
  ASSERT_TRUE((*client)->Restore("sim", 1).ok());
  {
    auto h = (*client)->OpenHistory("adj");
    ASSERT_TRUE(h.ok());
    ASSERT_TRUE((*h)->Push(0, region.data(), region.size()).ok());
    ASSERT_TRUE((*h)->Pop(0, region.data(), region.size()).ok());
  }
  ASSERT_TRUE((*client)->Close().ok());
  const std::string s = ReadAll(c.trace_path);
  for (const char* name : {"\"name\":\"checkpoint\"", "\"name\":\"flush\"", "\"name\":\"push\"",
                           "\"name\":\"pop (cache hit)\"", "\"name\":\"restore (cache hit)\"",
                           "\"name\":\"host cache\"", "cairn flusher"}) {
    EXPECT_NE(s.find(name), std::string::npos) << name << " missing in\n" << s;
  }
  EXPECT_NE(s.find("\"bytes\":307200,\"entry\":\"sim\",\"number\":1"), std::string::npos);
}

}  // namespace
}  // namespace cairn::core
