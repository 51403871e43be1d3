#pragma once
// Ranks as threads of one test process: point-to-point messages through a shared mailbox,
// matched by (from, to, tag) as MPI and Gloo match them; sends complete at once (buffered),
// receives block until their message is there. Anything else fails (FakeBackend), unless a
// derived class adds it.
#include <ATen/Tensor.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "fake_backend.h"

namespace loom::test {

struct Mailbox {
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::tuple<int, int, int>, std::vector<char>> box;  // (from, to, tag) -> bytes
};

class ThreadComm : public FakeBackend {
 public:
  ThreadComm(Mailbox& mail, const std::string& name, int rank, int size)
      : FakeBackend(name, rank, size), mail_(mail) {}

 protected:
  comm::WorkPtr do_send(const at::Tensor& t, int dst, int tag, const Call&) override {
    std::vector<char> bytes(t.nbytes());
    std::memcpy(bytes.data(), t.data_ptr(), bytes.size());
    {
      std::lock_guard<std::mutex> lock(mail_.mu);
      mail_.box[{rank(), dst, tag}] = std::move(bytes);
    }
    mail_.cv.notify_all();
    return done();
  }
  comm::WorkPtr do_recv(const at::Tensor& t, int src, int tag, const Call&) override {
    std::unique_lock<std::mutex> lock(mail_.mu);
    const auto key = std::make_tuple(src, rank(), tag);
    mail_.cv.wait(lock, [&] { return mail_.box.count(key) > 0; });
    EXPECT_EQ(mail_.box[key].size(), t.nbytes());
    std::memcpy(t.data_ptr(), mail_.box[key].data(), t.nbytes());
    mail_.box.erase(key);
    return done();
  }

  Mailbox& mail_;
};

}  // namespace loom::test
