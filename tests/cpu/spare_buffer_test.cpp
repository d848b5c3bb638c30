// One spare read buffer per thread: a buffer given back is the next one taken, when big enough.
#include "util/spare_buffer.hpp"

#include <gtest/gtest.h>

#include <string>
#include <thread>

namespace kcache::util {
namespace {

// Each test runs on a thread of its own: the spare is per thread, and other tests read files.
template <class Body>
void on_fresh_thread(Body body) {
    std::thread thread(body);
    thread.join();
}

TEST(SpareBuffer, ABufferGivenBackIsTheNextTaken) {
    on_fresh_thread([] {
        std::string first = take_buffer(11000);
        ASSERT_EQ(first.size(), 11000u);
        const char* memory = first.data();
        give_back_buffer(std::move(first));
        std::string second = take_buffer(10000);
        EXPECT_EQ(second.size(), 10000u);
        EXPECT_EQ(second.data(), memory) << "fresh memory where the spare would do";
        std::string third = take_buffer(100);
        EXPECT_NE(third.data(), memory) << "the spare was handed out twice";
    });
}

TEST(SpareBuffer, ARequestBiggerThanTheSpareGetsNewMemory) {
    on_fresh_thread([] {
        std::string small = take_buffer(1000);
        const char* memory = small.data();
        give_back_buffer(std::move(small));
        std::string big = take_buffer(100000);
        EXPECT_EQ(big.size(), 100000u);
        EXPECT_NE(big.data(), memory);
        std::string after = take_buffer(900);
        EXPECT_EQ(after.data(), memory) << "the spare was lost to a request it could not serve";
    });
}

TEST(SpareBuffer, TheBiggerOfTwoIsKept) {
    on_fresh_thread([] {
        std::string small = take_buffer(1000), big = take_buffer(50000);
        const char* big_memory = big.data();
        give_back_buffer(std::move(big));
        give_back_buffer(std::move(small));
        EXPECT_EQ(take_buffer(40000).data(), big_memory);
    });
}

TEST(SpareBuffer, AHugeBufferIsNotKept) {
    on_fresh_thread([] {
        std::string huge = take_buffer(std::size_t{8} << 20);
        const char* memory = huge.data();
        give_back_buffer(std::move(huge));
        EXPECT_NE(take_buffer(1000).data(), memory);
    });
}

TEST(SpareBuffer, EachThreadHasItsOwn) {
    on_fresh_thread([] {
        std::string mine = take_buffer(5000);
        const char* memory = mine.data();
        give_back_buffer(std::move(mine));
        const char* other_thread_got = nullptr;
        std::thread other([&] {
            std::string theirs = take_buffer(4000);
            other_thread_got = theirs.data();
        });
        other.join();
        EXPECT_NE(other_thread_got, memory);
        EXPECT_EQ(take_buffer(4000).data(), memory);
    });
}

}  // namespace
}  // namespace kcache::util
