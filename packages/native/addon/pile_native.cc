// @pile/native: the file and memory primitives under Pile's segments.
//
// A Mapping maps a file shared (read-write or read-only) or anonymous memory, and gives it to
// JavaScript as a Buffer whose memory is the mapping. unmap() returns the memory at once and
// leaves zero pages at its addresses, so a view JavaScript still holds never faults (see Region).
//
// A SharedMapping maps a file shared as a SharedArrayBuffer (the memory of a shared
// WebAssembly.Memory with the file mapped over it), so that Atomics act on it as the memory model
// of the language specifies. SharedMutex (a process-shared robust pthread mutex) and Futex (a
// futex that is not FUTEX_PRIVATE) live at an offset of either kind of mapping and work across
// processes; ofdLock/ofdHolder are OFD byte-range locks (see docs/concurrency.md).
//
// The addon is context-aware (Napi::Addon): every worker thread that loads it gets its own
// instance, and nothing here is per-process state.


#include <napi.h>
#include <uv.h>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <unistd.h>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#endif

// The functions below moved from libpthread into libc in glibc 2.34, which gave them new default
// symbol versions: a binary built against a newer glibc would ask for GLIBC_2.34 and not load on
// older systems. Binding to the versions they have had since 2.2.5 (2.12 for the robust calls)
// keeps the binary's requirement at glibc 2.14 (on aarch64, whose first glibc is 2.17, at 2.17);
// the code behind both versions is the same.
#if defined(__GLIBC__) && defined(__x86_64__)
__asm__(".symver pthread_mutexattr_init,pthread_mutexattr_init@GLIBC_2.2.5");
__asm__(".symver pthread_mutexattr_destroy,pthread_mutexattr_destroy@GLIBC_2.2.5");
__asm__(".symver pthread_mutexattr_settype,pthread_mutexattr_settype@GLIBC_2.2.5");
__asm__(".symver pthread_mutexattr_setpshared,pthread_mutexattr_setpshared@GLIBC_2.2.5");
__asm__(".symver pthread_mutexattr_setrobust,pthread_mutexattr_setrobust@GLIBC_2.12");
__asm__(".symver pthread_mutex_trylock,pthread_mutex_trylock@GLIBC_2.2.5");
__asm__(".symver pthread_mutex_timedlock,pthread_mutex_timedlock@GLIBC_2.2.5");
__asm__(".symver pthread_mutex_consistent,pthread_mutex_consistent@GLIBC_2.12");
#elif defined(__GLIBC__) && defined(__aarch64__)
__asm__(".symver pthread_mutexattr_init,pthread_mutexattr_init@GLIBC_2.17");
__asm__(".symver pthread_mutexattr_destroy,pthread_mutexattr_destroy@GLIBC_2.17");
__asm__(".symver pthread_mutexattr_settype,pthread_mutexattr_settype@GLIBC_2.17");
__asm__(".symver pthread_mutexattr_setpshared,pthread_mutexattr_setpshared@GLIBC_2.17");
__asm__(".symver pthread_mutexattr_setrobust,pthread_mutexattr_setrobust@GLIBC_2.17");
__asm__(".symver pthread_mutex_trylock,pthread_mutex_trylock@GLIBC_2.17");
__asm__(".symver pthread_mutex_timedlock,pthread_mutex_timedlock@GLIBC_2.17");
__asm__(".symver pthread_mutex_consistent,pthread_mutex_consistent@GLIBC_2.17");
#endif

#if defined(__linux__) && !defined(MADV_POPULATE_READ)
#define MADV_POPULATE_READ 22  // Linux 5.14+; older headers lack the constant.
#endif

#if defined(__linux__) && !defined(MADV_POPULATE_WRITE)
#define MADV_POPULATE_WRITE 23  // Linux 5.14+; older headers lack the constant.
#endif

namespace {

constexpr double kMaxSafeInteger = 9007199254740991.0;

size_t PageSize() {
  return static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

std::string ErrnoName(int err) {
  // libuv's error names are the POSIX errno names (ENOSPC, EACCES, ...), but it has none for
  // the mutex results.
  switch (err) {
    case EDEADLK: return "EDEADLK";
    case EOWNERDEAD: return "EOWNERDEAD";
    case ENOTRECOVERABLE: return "ENOTRECOVERABLE";
    default: return uv_err_name(uv_translate_sys_error(err));
  }
}

/** An Error naming the errno, the call and the file (and the byte offset in it, when >= 0). */
Napi::Error ErrnoError(Napi::Env env, int err, const char* syscall, const std::string& label, double offset = -1) {
  std::string name = ErrnoName(err);
  std::string where = label.empty() ? "" : " " + label;
  if (offset >= 0) where += " at offset " + std::to_string(static_cast<uint64_t>(offset));
  std::string message = std::string(syscall) + where + ": " + name + " (" + std::strerror(err) + ")";
  Napi::Error e = Napi::Error::New(env, message);
  e.Set("code", Napi::String::New(env, name));
  e.Set("errno", Napi::Number::New(env, -err));
  e.Set("syscall", Napi::String::New(env, syscall));
  if (!label.empty()) e.Set("path", Napi::String::New(env, label));
  if (offset >= 0) e.Set("offset", Napi::Number::New(env, offset));
  return e;
}

/** A JS number that must be a non-negative safe integer (64-bit lengths and offsets). */
bool ToSize(const Napi::Value& v, uint64_t* out) {
  if (!v.IsNumber()) return false;
  double d = v.As<Napi::Number>().DoubleValue();
  if (!(d >= 0) || d > kMaxSafeInteger || std::floor(d) != d) return false;
  *out = static_cast<uint64_t>(d);
  return true;
}

/**
 * The mapped memory, shared by the Mapping object, the Buffer's finalizer and the jobs running on
 * the libuv pool. Counted by hand rather than with std::shared_ptr, whose atomics would tie the
 * prebuilt binary to a newer glibc (__libc_single_threaded, 2.32) than the platforms it serves.
 *
 * Release() (unmap()) gives the memory back at once by mapping fresh anonymous zero pages over
 * the range (MAP_FIXED): the file's pages, or the anonymous memory, leave the process, while the
 * addresses stay valid for any view JavaScript still holds, which then reads zeros and writes to
 * private pages that reach no file. No fault, and no detached ArrayBuffer: detaching one, anywhere
 * in a process, makes V8 add a check to every typed-array access of optimised code from then on,
 * which cost the pile's typed put and field read 6 to 8 %. The addresses themselves are unmapped by
 * Free(), when the Buffer is collected. Both wait for the jobs running on the range.
 */
struct Region {
  std::mutex mu;
  void* addr;
  size_t length;
  bool released = false;  // unmap() ran: overlay when idle
  bool overlaid = false;
  bool freeing = false;   // the Buffer was collected: munmap when idle
  bool unmapped = false;
  // The addresses belong to V8 (a SharedMapping's WebAssembly memory): it unmaps them when the
  // SharedArrayBuffer is collected, so Free() leaves them alone.
  bool external = false;
  int jobs = 0;
  int refs = 1;

  Region(void* a, size_t l, bool ext = false) : addr(a), length(l), external(ext) {}

  Region* Ref() {
    std::lock_guard<std::mutex> lock(mu);
    refs++;
    return this;
  }
  void Unref() {
    bool last;
    {
      std::lock_guard<std::mutex> lock(mu);
      last = --refs == 0;
    }
    if (last) {
      Free();
      delete this;
    }
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu);
    released = true;
    Settle();
  }
  void Free() {
    std::lock_guard<std::mutex> lock(mu);
    released = freeing = true;
    Settle();
  }
  /** False once released: the job must not start. */
  bool Enter() {
    std::lock_guard<std::mutex> lock(mu);
    if (released) return false;
    jobs++;
    return true;
  }
  void Leave() {
    std::lock_guard<std::mutex> lock(mu);
    jobs--;
    Settle();
  }

 private:
  void Settle() {
    if (jobs > 0 || unmapped) return;
    if (freeing) {
      if (!external) munmap(addr, length);
      unmapped = true;
    } else if (released && !overlaid) {
      overlaid = true;
      void* p = mmap(addr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
      // Without the overlay, at least drop the pages: a stale access faults them in again from
      // the file (or as zeros), never from unmapped memory.
      if (p == MAP_FAILED) madvise(addr, length, MADV_DONTNEED);
    }
  }
};

/** A counted reference to a Region. */
class RegionRef {
 public:
  RegionRef() = default;
  explicit RegionRef(Region* r) : r_(r) {}
  RegionRef(const RegionRef& o) : r_(o.r_ ? o.r_->Ref() : nullptr) {}
  RegionRef(RegionRef&& o) noexcept : r_(o.r_) { o.r_ = nullptr; }
  RegionRef& operator=(const RegionRef&) = delete;
  RegionRef& operator=(RegionRef&& o) noexcept {
    if (this != &o) {
      if (r_) r_->Unref();
      r_ = o.r_;
      o.r_ = nullptr;
    }
    return *this;
  }
  ~RegionRef() { if (r_) r_->Unref(); }
  Region* operator->() const { return r_; }
  Region& operator*() const { return *r_; }

 private:
  Region* r_ = nullptr;
};

/** The whole pages inside [offset, offset + length) of the region: [from, to). */
void InnerPages(const Region& r, uint64_t offset, uint64_t length, uintptr_t* from, uintptr_t* to) {
  const uintptr_t page = PageSize();
  const uintptr_t base = reinterpret_cast<uintptr_t>(r.addr);
  *from = (base + offset + page - 1) & ~(page - 1);
  *to = (base + offset + length) & ~(page - 1);
}

/** The pages touching [offset, offset + length): [from, to). */
void OuterPages(const Region& r, uint64_t offset, uint64_t length, uintptr_t* from, uintptr_t* to) {
  const uintptr_t page = PageSize();
  const uintptr_t base = reinterpret_cast<uintptr_t>(r.addr);
  *from = (base + offset) & ~(page - 1);
  *to = (base + offset + length + page - 1) & ~(page - 1);
}

/** Faults the pages in for writing on the libuv pool (MADV_POPULATE_WRITE); done(errno) after. */
class PopulateJob : public Napi::AsyncWorker {
 public:
  PopulateJob(Napi::Env env, RegionRef region, uintptr_t from, uintptr_t to)
      : Napi::AsyncWorker(env, "pile:populate"), region_(std::move(region)), from_(from), to_(to) {}
  PopulateJob(Napi::Function done, RegionRef region, uintptr_t from, uintptr_t to)
      : Napi::AsyncWorker(done, "pile:populate"), region_(std::move(region)), from_(from), to_(to) {}

  // A failure is no error for the writer: its own stores then fault the pages in.
  void Execute() override {
    if (!region_->Enter()) {
      result_ = ENXIO;
      return;
    }
#if defined(__linux__)
    result_ = madvise(reinterpret_cast<void*>(from_), to_ - from_, MADV_POPULATE_WRITE) == 0 ? 0 : errno;
#else
    result_ = ENOSYS;
#endif
    region_->Leave();
  }
  void OnOK() override {
    if (!Callback().IsEmpty()) Callback().Call({Napi::Number::New(Env(), result_)});
  }

 private:
  RegionRef region_;
  uintptr_t from_, to_;
  int result_ = 0;
};

/**
 * A job on the libuv pool over a range of a mapping, settling a promise. It holds the mapped
 * object (Buffer or SharedArrayBuffer) until it is destroyed on the event loop: V8 unmaps a
 * SharedMapping's memory when its SharedArrayBuffer is collected, which must not happen while a
 * worker thread is in it. Region::Enter/Leave make unmap() wait for the job as well.
 */
class RangeJob : public Napi::AsyncWorker {
 public:
  RangeJob(Napi::Env env, const char* name, RegionRef region, Napi::Object keep, uint64_t offset, uint64_t length, std::string label)
      : Napi::AsyncWorker(env, name), region_(std::move(region)), keep_(Napi::Persistent(keep)), offset_(offset),
        length_(length), label_(std::move(label)), deferred_(Napi::Promise::Deferred::New(env)) {}

  Napi::Promise Promise() { return deferred_.Promise(); }

 protected:
  /**
   * On the worker: enters the region and sets [from, to) to the pages the range touches; false
   * (result ENXIO) when the mapping was unmapped first. After true, the job Leave()s the region.
   */
  bool EnterPages(uintptr_t* from, uintptr_t* to) {
    if (!region_->Enter()) {
      result_ = ENXIO;
      return false;
    }
    OuterPages(*region_, offset_, length_, from, to);
    return true;
  }

  RegionRef region_;
  Napi::ObjectReference keep_;
  uint64_t offset_, length_;
  std::string label_;
  Napi::Promise::Deferred deferred_;
  int result_ = 0;
};

/** msync(MS_SYNC) on the libuv pool; settles a promise. */
class SyncJob : public RangeJob {
 public:
  using RangeJob::RangeJob;

  void Execute() override {
    uintptr_t from, to;
    if (!EnterPages(&from, &to)) return;
    result_ = to > from && msync(reinterpret_cast<void*>(from), to - from, MS_SYNC) != 0 ? errno : 0;
    region_->Leave();
  }
  void OnOK() override {
    if (result_ == 0) deferred_.Resolve(Env().Undefined());
    else deferred_.Reject(ErrnoError(Env(), result_, "msync", label_).Value());
  }
};

/** Whether the kernel knows MADV_POPULATE_READ (Linux 5.14+). */
bool PopulateReadSupported() {
#if defined(__linux__)
  // The advice is checked before the range: a zero-length call fails only where it is unknown.
  return madvise(reinterpret_cast<void*>(PageSize()), 0, MADV_POPULATE_READ) == 0;
#else
  return false;
#endif
}

/**
 * warm(): faults the pages touching the range in for reading on the libuv pool, so that the
 * first reads after an open find them mapped: MADV_POPULATE_READ where the kernel has it, else
 * (or when asked) a read of one byte per page. Resolves with the method used.
 */
class WarmJob : public RangeJob {
 public:
  WarmJob(Napi::Env env, RegionRef region, Napi::Object keep, uint64_t offset, uint64_t length, std::string label, bool touch)
      : RangeJob(env, "pile:warm", std::move(region), keep, offset, length, std::move(label)), touch_(touch) {}

  void Execute() override {
    uintptr_t from, to;
    if (!EnterPages(&from, &to)) return;
    if (to > from) {
#if defined(__linux__)
      if (!touch_ && madvise(reinterpret_cast<void*>(from), to - from, MADV_POPULATE_READ) != 0) {
        result_ = errno;
        // EINVAL with a valid range: a kernel before 5.14, which does not know the advice.
        if (result_ == EINVAL && !PopulateReadSupported()) touch_ = true;
      }
#else
      touch_ = true;
#endif
      if (touch_) {
        // Like any read of the mapping, this faults (SIGBUS) on pages past the end of the file;
        // MADV_POPULATE_READ reports them as EFAULT instead.
        result_ = 0;
        const uintptr_t page = PageSize();
        uint8_t sum = 0;
        for (uintptr_t p = from; p < to; p += page) sum ^= *reinterpret_cast<volatile const uint8_t*>(p);
        sink_ = sum;
      }
    }
    region_->Leave();
  }
  void OnOK() override {
    if (result_ == 0) deferred_.Resolve(Napi::String::New(Env(), touch_ ? "touch" : "populate-read"));
    else deferred_.Reject(ErrnoError(Env(), result_, "madvise(MADV_POPULATE_READ)", label_, static_cast<double>(offset_)).Value());
  }

 private:
  bool touch_;
  uint8_t sink_ = 0;
};

/** What Mapping and SharedMapping share: the region, its range checks and the jobs over it. */
template <typename T>
class MappingBase : public Napi::ObjectWrap<T> {
 public:
  explicit MappingBase(const Napi::CallbackInfo& info) : Napi::ObjectWrap<T>(info) {}

  Region& region() { return *region_; }
  RegionRef regionRef() { return region_; }
  const std::string& label() const { return label_; }

 protected:
  /** The accessors and methods both kinds have. */
  static std::vector<Napi::ClassPropertyDescriptor<T>> CommonProperties() {
    using W = Napi::ObjectWrap<T>;
    return {
      W::InstanceAccessor("buffer", &T::GetBuffer, nullptr),
      W::InstanceAccessor("mapped", &T::GetMapped, nullptr),
      W::InstanceAccessor("length", &T::GetLength, nullptr),
      W::InstanceMethod("sync", &T::Sync),
      W::InstanceMethod("syncAsync", &T::SyncAsync),
      W::InstanceMethod("advise", &T::Advise),
      W::InstanceMethod("warm", &T::Warm),
      W::InstanceMethod("unmap", &T::Unmap),
    };
  }

  Napi::Value GetBuffer(const Napi::CallbackInfo& info) {
    if (buffer_.IsEmpty()) return info.Env().Undefined();
    Napi::Value v = buffer_.Value();
    return v.IsEmpty() ? info.Env().Undefined() : v;
  }
  Napi::Value GetMapped(const Napi::CallbackInfo& info) {
    std::lock_guard<std::mutex> lock(region_->mu);
    return Napi::Boolean::New(info.Env(), !region_->released);
  }
  Napi::Value GetLength(const Napi::CallbackInfo& info) {
    return Napi::Number::New(info.Env(), static_cast<double>(region_->length));
  }

  /** Checks (offset, length) against the mapping; throws otherwise. */
  void Range(const Napi::CallbackInfo& info, const char* what, uint64_t* offset, uint64_t* length) {
    Napi::Env env = info.Env();
    *offset = 0;
    *length = region_->length;
    if (info.Length() > 0 && !info[0].IsUndefined() && !ToSize(info[0], offset)) {
      throw Napi::TypeError::New(env, std::string(what) + ": offset must be a non-negative integer");
    }
    if (info.Length() > 1 && !info[1].IsUndefined()) {
      if (!ToSize(info[1], length)) throw Napi::TypeError::New(env, std::string(what) + ": length must be a non-negative integer");
    } else {
      *length = *offset <= region_->length ? region_->length - *offset : 0;
    }
    if (*offset > region_->length || *length > region_->length - *offset) {
      throw Napi::RangeError::New(env, std::string(what) + ": offset and length must lie within the mapping");
    }
    std::lock_guard<std::mutex> lock(region_->mu);
    if (region_->released) throw Napi::Error::New(env, std::string(what) + ": the mapping was unmapped");
  }

  /** sync(offset?, length?): msync(MS_SYNC) of the pages of that range. */
  void Sync(const Napi::CallbackInfo& info) {
    uint64_t offset, length;
    Range(info, "sync", &offset, &length);
    uintptr_t from, to;
    OuterPages(*region_, offset, length, &from, &to);
    if (to > from && msync(reinterpret_cast<void*>(from), to - from, MS_SYNC) != 0) {
      throw ErrnoError(info.Env(), errno, "msync", label_);
    }
  }

  /** syncAsync(offset?, length?): Promise<void>, msync on the libuv pool. */
  Napi::Value SyncAsync(const Napi::CallbackInfo& info) {
    uint64_t offset, length;
    Range(info, "syncAsync", &offset, &length);
    auto job = new SyncJob(info.Env(), "pile:sync", region_, buffer_.Value(), offset, length, label_);
    Napi::Promise p = job->Promise();
    job->Queue();
    return p;
  }

  /** advise(offset, length, advice): madvise of the pages touching that range. */
  void Advise(const Napi::CallbackInfo& info) {
    uint64_t offset, length;
    Range(info, "advise", &offset, &length);
    if (info.Length() < 3 || !info[2].IsNumber()) throw Napi::TypeError::New(info.Env(), "advise: advice must be one of the ADVICE numbers");
    const int advice = info[2].As<Napi::Number>().Int32Value();
    uintptr_t from, to;
    OuterPages(*region_, offset, length, &from, &to);
    if (to > from && madvise(reinterpret_cast<void*>(from), to - from, advice) != 0) {
      throw ErrnoError(info.Env(), errno, "madvise", label_);
    }
  }

  /** warm(offset, length, how?): Promise of the method used; see WarmJob. */
  Napi::Value Warm(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (info.Length() < 2 || info[0].IsUndefined() || info[1].IsUndefined()) {
      throw Napi::TypeError::New(env, "warm(offset: integer >= 0, length: integer >= 0, how?: 'auto' | 'touch')");
    }
    uint64_t offset, length;
    Range(info, "warm", &offset, &length);
    bool touch = false;
    if (info.Length() > 2 && !info[2].IsUndefined()) {
      const std::string how = info[2].IsString() ? info[2].As<Napi::String>().Utf8Value() : "";
      if (how != "auto" && how != "touch") throw Napi::TypeError::New(env, "warm: how must be 'auto' or 'touch'");
      touch = how == "touch";
    }
    auto job = new WarmJob(env, region_, buffer_.Value(), offset, length, label_, touch);
    Napi::Promise p = job->Promise();
    job->Queue();
    return p;
  }

  /**
   * unmap(): gives the memory back at once (see Region). Views JavaScript still holds stay valid
   * and read zeros; `buffer` is then undefined. Idempotent.
   */
  void Unmap(const Napi::CallbackInfo& info) {
    region_->Release();
    buffer_.Reset();
  }

  RegionRef region_;
  Napi::ObjectReference buffer_;
  std::string label_;
};

// Type tags: a SharedMutex or Futex accepts either kind of mapping, and nothing else.
constexpr napi_type_tag kMappingTag = {0x5d1e0c6a2f1b4e37ULL, 0x9a4c3b2e1f0d8c71ULL};
constexpr napi_type_tag kSharedMappingTag = {0x3b7f9e2d4c6a1805ULL, 0xe2d1c0b9a8f7e6d5ULL};

/**
 * new Mapping(fd, length, offset, writable, label): a shared mapping of the file open as `fd`
 * (writable false: a private copy-on-write one; fd -1: private anonymous memory). `label` (the file's path) names it in errors.
 */
class Mapping : public MappingBase<Mapping> {
 public:
  static Napi::Function Define(Napi::Env env) {
    auto props = CommonProperties();
    props.push_back(InstanceMethod("populate", &Mapping::Populate));
    return DefineClass(env, "Mapping", props);
  }

  explicit Mapping(const Napi::CallbackInfo& info) : MappingBase<Mapping>(info) {
    Napi::Env env = info.Env();
    uint64_t length = 0, offset = 0;
    if (info.Length() < 4 || !info[0].IsNumber() || !ToSize(info[1], &length) || !ToSize(info[2], &offset) ||
        !info[3].IsBoolean() || (info.Length() > 4 && !info[4].IsString() && !info[4].IsUndefined())) {
      throw Napi::TypeError::New(env, "new Mapping(fd: integer (-1: anonymous), length: integer > 0, offset: integer >= 0, writable: boolean, label?: string)");
    }
    const int fd = info[0].As<Napi::Number>().Int32Value();
    const bool writable = info[3].As<Napi::Boolean>().Value();
    if (info.Length() > 4 && info[4].IsString()) label_ = info[4].As<Napi::String>().Utf8Value();
    if (length == 0 || length > SIZE_MAX) throw Napi::RangeError::New(env, "Mapping: length must be a positive integer");
    if (offset % PageSize() != 0) throw Napi::RangeError::New(env, "Mapping: offset must be a multiple of the page size");
    // A file mapped for reading only is private and writable: a stray store through a Buffer of a
    // read-only pile then lands in a copy of that page in this process instead of faulting
    // (SIGSEGV), and never reaches the file. Pages it never wrote still show the file's contents.
    const int prot = PROT_READ | PROT_WRITE;
    const int flags = fd < 0 ? MAP_PRIVATE | MAP_ANONYMOUS : writable ? MAP_SHARED : MAP_PRIVATE;
    void* addr = mmap(nullptr, static_cast<size_t>(length), prot, flags, fd < 0 ? -1 : fd, fd < 0 ? 0 : static_cast<off_t>(offset));
    if (addr == MAP_FAILED) throw ErrnoError(env, errno, "mmap", label_);
    region_ = RegionRef(new Region(addr, static_cast<size_t>(length)));

    // The finalizer (the Buffer collected, or the environment torn down) holds its own reference,
    // so the memory is unmapped exactly once, by whichever of it and unmap() comes first.
    auto hint = new RegionRef(region_);
    Napi::Buffer<uint8_t> buf;
    try {
      buf = Napi::Buffer<uint8_t>::New(env, static_cast<uint8_t*>(addr), static_cast<size_t>(length),
          [](Napi::Env, uint8_t*, RegionRef* ref) {
            (*ref)->Free();
            delete ref;
          }, hint);
    } catch (...) {
      delete hint;
      region_->Free();
      throw;
    }
    // Held strongly for the life of this object: the Buffer must not be collected (and unmapped)
    // before JavaScript has taken it from `buffer`.
    buffer_ = Napi::Persistent(static_cast<Napi::Object>(buf));
    napi_type_tag_object(env, info.This(), &kMappingTag);
  }

  static bool PopulateSupported() {
#if defined(__linux__)
    // The kernel validates the advice before the range: a zero-length call on an aligned address
    // fails only where MADV_POPULATE_WRITE is unknown (Linux before 5.14). Cheap, so not cached.
    return madvise(reinterpret_cast<void*>(PageSize()), 0, MADV_POPULATE_WRITE) == 0;
#else
    return false;
#endif
  }

 private:
  /**
   * populate(offset, length, done?): faults the whole pages of the range in for writing on a
   * libuv worker (MADV_POPULATE_WRITE), then calls done(errno). The content never changes: it
   * does what the writer's own first store would make the kernel do. Returns false (and queues
   * nothing) where the kernel can not, or when the range holds no whole page.
   */
  Napi::Value Populate(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    uint64_t offset, length;
    Range(info, "populate", &offset, &length);
    if (info.Length() > 2 && !info[2].IsFunction() && !info[2].IsUndefined()) {
      throw Napi::TypeError::New(env, "populate: done must be a function");
    }
    if (!PopulateSupported()) return Napi::Boolean::New(env, false);
    uintptr_t from, to;
    InnerPages(*region_, offset, length, &from, &to);
    if (to <= from) return Napi::Boolean::New(env, false);
    PopulateJob* job = info.Length() > 2 && info[2].IsFunction()
        ? new PopulateJob(info[2].As<Napi::Function>(), region_, from, to)
        : new PopulateJob(env, region_, from, to);
    job->Queue();
    return Napi::Boolean::New(env, true);
  }
};

/** The unit of a SharedMapping's length: the WebAssembly page. */
constexpr uint64_t kWasmPage = 65536;
constexpr uint64_t kMaxWasmPages = 65536;

/**
 * new SharedMapping(fd, length, offset, label): the file mapped shared read-write as a
 * SharedArrayBuffer. Node-API can not make a SharedArrayBuffer over outside memory, so this makes
 * a shared WebAssembly.Memory of exactly `length` bytes (its buffer is a SharedArrayBuffer, and
 * V8 allocates it page-aligned with mmap and frees it with munmap), and maps the file over that
 * memory with MAP_FIXED. The Memory object never leaves this function, so nothing can grow it
 * (growing would change its pages' protection). V8 unmaps the addresses when the
 * SharedArrayBuffer is collected; unmap() puts zero pages over the file's before that, as for a
 * Mapping.
 */
class SharedMapping : public MappingBase<SharedMapping> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "SharedMapping", CommonProperties());
  }

  explicit SharedMapping(const Napi::CallbackInfo& info) : MappingBase<SharedMapping>(info) {
    Napi::Env env = info.Env();
    uint64_t length = 0, offset = 0;
    if (info.Length() < 3 || !info[0].IsNumber() || !ToSize(info[1], &length) || !ToSize(info[2], &offset) ||
        (info.Length() > 3 && !info[3].IsString() && !info[3].IsUndefined())) {
      throw Napi::TypeError::New(env, "new SharedMapping(fd: integer, length: integer (a multiple of 65536), offset: integer >= 0, label?: string)");
    }
    const int fd = info[0].As<Napi::Number>().Int32Value();
    if (info.Length() > 3 && info[3].IsString()) label_ = info[3].As<Napi::String>().Utf8Value();
    if (length == 0 || length % kWasmPage != 0 || length > kWasmPage * kMaxWasmPages) {
      throw Napi::RangeError::New(env, "SharedMapping: length must be a positive multiple of 65536, at most 4 GiB");
    }
    if (offset % PageSize() != 0) throw Napi::RangeError::New(env, "SharedMapping: offset must be a multiple of the page size");
    Napi::Value wasm = env.Global().Get("WebAssembly");
    if (!wasm.IsObject() || !wasm.As<Napi::Object>().Get("Memory").IsFunction()) {
      throw Napi::Error::New(env, "SharedMapping: WebAssembly is not available in this process (was Node started with --jitless?)");
    }
    Napi::Object opts = Napi::Object::New(env);
    opts.Set("initial", static_cast<double>(length / kWasmPage));
    opts.Set("maximum", static_cast<double>(length / kWasmPage));
    opts.Set("shared", true);
    Napi::Object memory = wasm.As<Napi::Object>().Get("Memory").As<Napi::Function>().New({opts});
    Napi::Object sab = memory.Get("buffer").As<Napi::Object>();
    Napi::Object bytes = env.Global().Get("Uint8Array").As<Napi::Function>().New({sab});
    void* data = nullptr;
    size_t n = 0;
    napi_typedarray_type type;
    if (napi_get_typedarray_info(env, bytes, &type, &n, &data, nullptr, nullptr) != napi_ok || data == nullptr || n != length) {
      throw Napi::Error::New(env, "SharedMapping: can not reach the memory of the SharedArrayBuffer");
    }
    if (reinterpret_cast<uintptr_t>(data) % PageSize() != 0) {
      throw Napi::Error::New(env, "SharedMapping: the SharedArrayBuffer's memory is not page-aligned; it can not take a file mapping");
    }
    void* addr = mmap(data, static_cast<size_t>(length), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, static_cast<off_t>(offset));
    if (addr == MAP_FAILED) {
      // The memory is V8's anonymous memory again only if MAP_FIXED failed before replacing it;
      // mmap replaces nothing when it fails on the descriptor or the offset, which it checks first.
      throw ErrnoError(env, errno, "mmap", label_);
    }
    region_ = RegionRef(new Region(addr, static_cast<size_t>(length), true));
    buffer_ = Napi::Persistent(sab);
    napi_type_tag_object(env, info.This(), &kSharedMappingTag);
  }
};

/** The region of a Mapping or SharedMapping, or nullptr for anything else. */
Region* RegionOf(Napi::Env env, const Napi::Value& v, std::string* label) {
  if (!v.IsObject()) return nullptr;
  bool is = false;
  if (napi_check_object_type_tag(env, v, &kMappingTag, &is) == napi_ok && is) {
    Mapping* m = Mapping::Unwrap(v.As<Napi::Object>());
    *label = m->label();
    return &m->region();
  }
  if (napi_check_object_type_tag(env, v, &kSharedMappingTag, &is) == napi_ok && is) {
    SharedMapping* m = SharedMapping::Unwrap(v.As<Napi::Object>());
    *label = m->label();
    return &m->region();
  }
  return nullptr;
}

/**
 * The pages holding [offset, offset + size) of a mapping, mapped again at addresses of their own
 * (mremap with old size 0 duplicates a shared mapping: the same file pages, so the same memory and
 * the same futex keys). A SharedMutex and a Futex use this view: it stays valid however the
 * mapping is unmapped or collected, and a mutex's view can outlive its JavaScript environment
 * (see SharedMutex::Finalize).
 */
class PageView {
 public:
  PageView() = default;
  PageView(const PageView&) = delete;
  PageView& operator=(const PageView&) = delete;
  ~PageView() { Unmap(); }

  /** Maps the view; throws on a bad argument or when the mapping is not a shared one. */
  void Map(const Napi::CallbackInfo& info, const char* what, size_t size, size_t align) {
    Napi::Env env = info.Env();
    Region* r = info.Length() > 0 ? RegionOf(env, info[0], &label_) : nullptr;
    uint64_t offset = 0;
    if (r == nullptr || info.Length() < 2 || !ToSize(info[1], &offset) ||
        (info.Length() > 2 && !info[2].IsString() && !info[2].IsUndefined())) {
      throw Napi::TypeError::New(env, std::string("new ") + what + "(mapping: Mapping | SharedMapping, offset: integer >= 0, label?: string)");
    }
    if (info.Length() > 2 && info[2].IsString()) label_ = info[2].As<Napi::String>().Utf8Value();
    if (offset % align != 0 || offset > r->length || size > r->length - offset) {
      throw Napi::RangeError::New(env, std::string(what) + ": offset " + std::to_string(offset) + " must be a multiple of " +
          std::to_string(align) + " with " + std::to_string(size) + " bytes inside the mapping");
    }
    {
      std::lock_guard<std::mutex> lock(r->mu);
      if (r->released) throw Napi::Error::New(env, std::string(what) + ": the mapping was unmapped");
    }
    const uintptr_t page = PageSize();
    const uintptr_t at = reinterpret_cast<uintptr_t>(r->addr) + offset;
    const uintptr_t from = at & ~(page - 1);
    const size_t len = ((at + size + page - 1) & ~(page - 1)) - from;
#if defined(__linux__)
    void* p = mremap(reinterpret_cast<void*>(from), 0, len, MREMAP_MAYMOVE);
    if (p == MAP_FAILED) {
      const int err = errno;
      if (err == EINVAL) {
        throw Napi::Error::New(env, std::string(what) + (label_.empty() ? "" : " " + label_) + ": the mapping must be a file mapped shared read-write " +
            "(a Mapping with writable true, or a SharedMapping), so that other processes see the same memory");
      }
      throw ErrnoError(env, err, "mremap", label_, static_cast<double>(offset));
    }
    base_ = p;
    len_ = len;
    at_ = static_cast<uint8_t*>(p) + (at - from);
    offset_ = offset;
#else
    throw Napi::Error::New(env, std::string(what) + ": needs Linux");
#endif
  }

  void Unmap() {
    if (base_ != nullptr) munmap(base_, len_);
    Forget();
  }
  /** Leaves the pages mapped for good. */
  void Forget() {
    base_ = nullptr;
    at_ = nullptr;
  }
  uint8_t* at() const { return at_; }
  double offset() const { return static_cast<double>(offset_); }
  const std::string& label() const { return label_; }

 private:
  void* base_ = nullptr;
  size_t len_ = 0;
  uint8_t* at_ = nullptr;
  uint64_t offset_ = 0;
  std::string label_;
};

/**
 * What SharedMutex and Futex share: a JavaScript object over a PageView of one `Word` at an offset
 * of a file mapped shared; the check each call makes that close() has not run; the errors that
 * name the call, the file and the offset; the `offset` accessor.
 */
template <typename T, typename Word>
class PageWord : public Napi::ObjectWrap<T> {
 public:
  PageWord(const Napi::CallbackInfo& info, const char* cls, const char* noun, size_t align)
      : Napi::ObjectWrap<T>(info), cls_(cls), noun_(noun) {
    view_.Map(info, cls, sizeof(Word), align);
  }

 protected:
  /** The word; `<class>.<what>: the <noun> was closed` once close() ran. */
  Word* At(const Napi::CallbackInfo& info, const char* what) {
    if (view_.at() == nullptr) throw Napi::Error::New(info.Env(), std::string(cls_) + "." + what + ": the " + noun_ + " was closed");
    return reinterpret_cast<Word*>(view_.at());
  }
  /** The error of `call` failing with `err`, naming the file and the word's offset in it. */
  Napi::Error Fail(Napi::Env env, int err, const char* call) { return ErrnoError(env, err, call, view_.label(), view_.offset()); }
  Napi::Value GetOffset(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), view_.offset()); }

  PageView view_;

 private:
  const char* cls_;
  const char* noun_;
};

// SharedMutex results (MUTEX in JavaScript).
constexpr int kLocked = 0;
constexpr int kOwnerDead = 1;
constexpr int kBusy = 2;
constexpr int kTimedOut = 3;

/**
 * new SharedMutex(mapping, offset, label?): a process-shared, robust, error-checking pthread mutex
 * at `offset` of a mapping of a file (see PageView). Robust: when the thread holding it dies (its
 * process killed, or a worker thread ended), the kernel marks it, and the next locker gets it with
 * OWNER_DEAD; it must repair what the dead holder left and call consistent() before unlock(), or
 * the mutex becomes unusable (ENOTRECOVERABLE) until init() runs again. Error-checking: a thread
 * that locks it twice gets EDEADLK instead of blocking forever, and only the holder can unlock.
 */
class SharedMutex : public PageWord<SharedMutex, pthread_mutex_t> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "SharedMutex", {
      InstanceMethod<&SharedMutex::Init>("init"),
      InstanceMethod<&SharedMutex::Lock>("lock"),
      InstanceMethod<&SharedMutex::TryLock>("tryLock"),
      InstanceMethod<&SharedMutex::TimedLock>("timedLock"),
      InstanceMethod<&SharedMutex::Unlock>("unlock"),
      InstanceMethod<&SharedMutex::Consistent>("consistent"),
      InstanceMethod<&SharedMutex::Close>("close"),
      InstanceAccessor<&SharedMutex::GetHeld>("held"),
      InstanceAccessor("offset", &SharedMutex::GetOffset, nullptr),
    });
  }

  explicit SharedMutex(const Napi::CallbackInfo& info)
      : PageWord(info, "SharedMutex", "mutex", alignof(pthread_mutex_t) > 8 ? alignof(pthread_mutex_t) : 8) {}

  /**
   * Collected (or its environment torn down) while this thread holds the mutex: the view stays
   * mapped, because the kernel marks the mutex OWNER_DEAD through it when the thread exits (a
   * worker thread terminated while holding the lock). Unmapped, the mutex would stay locked by a
   * thread that no longer exists, and every later locker would wait forever.
   */
  ~SharedMutex() override {
    if (held_) view_.Forget();
  }

 private:

  /**
   * init(): makes the bytes a fresh unlocked mutex. Only when no process uses it: when the file
   * is created, or to replace an ENOTRECOVERABLE mutex, under an exclusive lock of the file.
   */
  void Init(const Napi::CallbackInfo& info) {
    pthread_mutex_t* m = At(info, "init");
    pthread_mutexattr_t attr;
    int rc = pthread_mutexattr_init(&attr);
    if (rc != 0) throw Fail(info.Env(), rc, "pthread_mutexattr_init");
    rc = pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    if (rc == 0) rc = pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
    if (rc == 0) rc = pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ERRORCHECK);
    if (rc == 0) {
      // As LMDB does: some systems skip or refuse an init over bytes that look like a mutex.
      std::memset(static_cast<void*>(m), 0, sizeof(*m));
      rc = pthread_mutex_init(m, &attr);
    }
    pthread_mutexattr_destroy(&attr);
    if (rc != 0) throw Fail(info.Env(), rc, "pthread_mutex_init");
    held_ = false;
  }

  /** The result of a lock call that did not time out or find it busy. */
  Napi::Value Locked(const Napi::CallbackInfo& info, int rc, const char* call) {
    if (rc == 0 || rc == EOWNERDEAD) {
      held_ = true;
      return Napi::Number::New(info.Env(), rc == 0 ? kLocked : kOwnerDead);
    }
    throw Fail(info.Env(), rc, call);
  }

  /** lock(): MUTEX.LOCKED or MUTEX.OWNER_DEAD; blocks the calling thread until it has the lock. */
  Napi::Value Lock(const Napi::CallbackInfo& info) {
    pthread_mutex_t* m = At(info, "lock");
    return Locked(info, pthread_mutex_lock(m), "pthread_mutex_lock");
  }

  /** tryLock(): MUTEX.LOCKED, MUTEX.OWNER_DEAD or MUTEX.BUSY. */
  Napi::Value TryLock(const Napi::CallbackInfo& info) {
    pthread_mutex_t* m = At(info, "tryLock");
    const int rc = pthread_mutex_trylock(m);
    if (rc == EBUSY) return Napi::Number::New(info.Env(), kBusy);
    return Locked(info, rc, "pthread_mutex_trylock");
  }

  /** timedLock(ms): MUTEX.LOCKED, MUTEX.OWNER_DEAD or MUTEX.TIMED_OUT after `ms` milliseconds. */
  Napi::Value TimedLock(const Napi::CallbackInfo& info) {
    pthread_mutex_t* m = At(info, "timedLock");
    double ms = info.Length() > 0 && info[0].IsNumber() ? info[0].As<Napi::Number>().DoubleValue() : -1;
    if (!(ms >= 0)) throw Napi::TypeError::New(info.Env(), "SharedMutex.timedLock(ms: number >= 0)");
    if (ms > 1e12) ms = 1e12;  // about 30 years: a deadline that still fits a timespec
    // pthread_mutex_timedlock takes a CLOCK_REALTIME deadline (pthread_mutex_clocklock, which
    // takes CLOCK_MONOTONIC, needs glibc 2.30); a jump of the wall clock moves the deadline.
    struct timeval now;
    gettimeofday(&now, nullptr);
    const double deadline_us = static_cast<double>(now.tv_sec) * 1e6 + static_cast<double>(now.tv_usec) + ms * 1e3;
    struct timespec ts;
    ts.tv_sec = static_cast<time_t>(deadline_us / 1e6);
    ts.tv_nsec = static_cast<long>((deadline_us - static_cast<double>(ts.tv_sec) * 1e6) * 1e3);
    if (ts.tv_nsec < 0) ts.tv_nsec = 0;
    if (ts.tv_nsec > 999999999) ts.tv_nsec = 999999999;
    const int rc = pthread_mutex_timedlock(m, &ts);
    if (rc == ETIMEDOUT) return Napi::Number::New(info.Env(), kTimedOut);
    return Locked(info, rc, "pthread_mutex_timedlock");
  }

  /** unlock(): EPERM when this thread does not hold it. */
  void Unlock(const Napi::CallbackInfo& info) {
    pthread_mutex_t* m = At(info, "unlock");
    const int rc = pthread_mutex_unlock(m);
    if (rc != 0) throw Fail(info.Env(), rc, "pthread_mutex_unlock");
    held_ = false;
  }

  /** consistent(): after OWNER_DEAD and the repair; EINVAL when there is nothing to make consistent. */
  void Consistent(const Napi::CallbackInfo& info) {
    pthread_mutex_t* m = At(info, "consistent");
    const int rc = pthread_mutex_consistent(m);
    if (rc != 0) throw Fail(info.Env(), rc, "pthread_mutex_consistent");
  }

  /** close(): unmaps the view; EBUSY while this thread holds the mutex. Idempotent. */
  void Close(const Napi::CallbackInfo& info) {
    if (held_) throw Fail(info.Env(), EBUSY, "SharedMutex.close");
    view_.Unmap();
  }

  Napi::Value GetHeld(const Napi::CallbackInfo& info) { return Napi::Boolean::New(info.Env(), held_); }

  bool held_ = false;  // this thread holds it (bookkeeping of this object's own calls)
};

/**
 * new Futex(mapping, offset, label?): futex wait and wake on the 32-bit word at `offset` of a file
 * mapped shared (see PageView). Not FUTEX_PRIVATE: the kernel keys the waiters by the file's page,
 * so a wake reaches waiters in every process that maps the file.
 */
class Futex : public PageWord<Futex, uint32_t> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "Futex", {
      InstanceMethod<&Futex::Wait>("wait"),
      InstanceMethod<&Futex::Wake>("wake"),
      InstanceMethod<&Futex::Close>("close"),
      InstanceAccessor("offset", &Futex::GetOffset, nullptr),
    });
  }

  explicit Futex(const Napi::CallbackInfo& info) : PageWord(info, "Futex", "futex", 4) {}

 private:
  /**
   * wait(expected, timeoutMs?): sleeps while the word holds `expected` (as Atomics.wait does):
   * 'ok' when woken (or spuriously: check the word), 'not-equal', or 'timed-out'. Blocks the
   * calling thread. A signal does not end the wait early: it goes on for the time left.
   */
  Napi::Value Wait(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    uint32_t* word = At(info, "wait");
    if (info.Length() < 1 || !info[0].IsNumber()) throw Napi::TypeError::New(env, "Futex.wait(expected: integer, timeoutMs?: number >= 0)");
    const uint32_t expected = static_cast<uint32_t>(info[0].As<Napi::Number>().Int32Value());
    double ms = INFINITY;
    if (info.Length() > 1 && !info[1].IsUndefined()) {
      ms = info[1].IsNumber() ? info[1].As<Napi::Number>().DoubleValue() : -1;
      if (!(ms >= 0)) throw Napi::TypeError::New(env, "Futex.wait: timeoutMs must be a number >= 0");
    }
#if defined(__linux__)
    const bool forever = std::isinf(ms);
    const uint64_t deadline = forever ? 0 : uv_hrtime() + static_cast<uint64_t>(std::fmin(ms, 1e12) * 1e6);
    for (;;) {
      struct timespec ts;
      struct timespec* tsp = nullptr;
      if (!forever) {
        const uint64_t now = uv_hrtime();
        const uint64_t left = deadline > now ? deadline - now : 0;
        ts.tv_sec = static_cast<time_t>(left / 1000000000ULL);
        ts.tv_nsec = static_cast<long>(left % 1000000000ULL);
        tsp = &ts;
      }
      if (syscall(SYS_futex, word, FUTEX_WAIT, expected, tsp, nullptr, 0) == 0) return Napi::String::New(env, "ok");
      const int err = errno;
      if (err == EAGAIN) return Napi::String::New(env, "not-equal");
      if (err == ETIMEDOUT) return Napi::String::New(env, "timed-out");
      if (err != EINTR) throw Fail(env, err, "futex(FUTEX_WAIT)");
    }
#else
    throw Napi::Error::New(env, "Futex: needs Linux");
#endif
  }

  /** wake(count?): wakes up to `count` waiters (default: all) in any process; the number woken. */
  Napi::Value Wake(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    uint32_t* word = At(info, "wake");
    int count = INT32_MAX;
    if (info.Length() > 0 && !info[0].IsUndefined()) {
      const double c = info[0].IsNumber() ? info[0].As<Napi::Number>().DoubleValue() : -1;
      if (!(c >= 0) || std::floor(c) != c) throw Napi::TypeError::New(env, "Futex.wake(count?: integer >= 0)");
      count = c > INT32_MAX ? INT32_MAX : static_cast<int>(c);
    }
#if defined(__linux__)
    const long woken = syscall(SYS_futex, word, FUTEX_WAKE, count, nullptr, nullptr, 0);
    if (woken < 0) throw Fail(env, errno, "futex(FUTEX_WAKE)");
    return Napi::Number::New(env, static_cast<double>(woken));
#else
    throw Napi::Error::New(env, "Futex: needs Linux");
#endif
  }

  /** close(): unmaps the view. Idempotent. */
  void Close(const Napi::CallbackInfo& info) { view_.Unmap(); }
};

// Pile's block format, as packages/core/src/BlockFormat.ts and Checksum.ts define it (they are the
// one definition; core's tests check that this walk accepts exactly the blocks its own does): a
// block starts with four words, its size, word1 (generation, kind, state and flag bits), the
// payload's length and its checksum.
namespace block_format {
constexpr uint32_t kHeaderSize = 16;
constexpr uint32_t kMinBlockSize = 32;
constexpr int kKindShift = 22;
constexpr uint32_t kKindMask = 0xf;
constexpr int kStateShift = 26;
constexpr uint32_t kStateMask = 0x3;
constexpr int kFlagShift = 28;
constexpr uint32_t kStateUsed = 1;
constexpr uint32_t kStateDamaged = 3;
constexpr uint32_t kGenMask = (1u << 22) - 1;
constexpr uint32_t kFlagBody = 1;
constexpr uint32_t kFlagSealed = 2;
constexpr uint32_t kKindLink = 5;
constexpr uint32_t kKindJournal = 7;
constexpr uint32_t kKindRaw = 8;
constexpr uint32_t kKindBuffer = 9;
// From this length on the checksum is zlib's CRC32, which the walk leaves to JavaScript.
constexpr uint32_t kNativeChecksumFrom = 1024;
// plainFile reads a segment file in reads of this many bytes (a record longer than that in one read).
constexpr uint64_t kFileChunk = 256 * 1024;
// plainFile's numbers per free run (see there).
constexpr size_t kRunFields = 11;

inline uint32_t Rotl(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

inline uint32_t Fmix32(uint32_t h) {
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}

/** Checksum.ts headerChecksum: a mutable raw block's, over its header alone. */
inline uint32_t HeaderChecksum(uint32_t size, uint32_t w1, uint32_t length) {
  return Fmix32(((size ^ 0x3c6ef372u) * 0x85ebca6bu) ^ ((w1 ^ 0x5bd1e995u) * 0xc2b2ae35u) ^ length);
}

/** Checksum.ts blockChecksum for a length below kNativeChecksumFrom: Murmur3-32 over the payload's words. */
inline uint32_t BlockChecksum(const uint32_t* payload, uint32_t size, uint32_t w1, uint32_t length) {
  uint32_t h = ((size ^ 0x9747b28cu) * 0x85ebca6bu) ^ (w1 * 0xc2b2ae35u) ^ length;
  const uint32_t words = length >> 2;
  for (uint32_t i = 0; i < words; i++) {
    uint32_t k = payload[i] * 0xcc9e2d51u;
    k = Rotl(k, 15);
    h ^= k * 0x1b873593u;
    h = Rotl(h, 13);
    h = h * 5 + 0xe6546b64u;
  }
  const uint32_t tail = length & 3;
  if (tail != 0) {
    const uint8_t* b = reinterpret_cast<const uint8_t*>(payload + words);
    uint32_t k = b[0];
    if (tail > 1) k |= static_cast<uint32_t>(b[1]) << 8;
    if (tail > 2) k |= static_cast<uint32_t>(b[2]) << 16;
    k *= 0xcc9e2d51u;
    k = Rotl(k, 15);
    h ^= k * 0x1b873593u;
  }
  return Fmix32(h ^ length);
}

/** zlib's crc32(crc, bytes, n) (the reflected polynomial 0xedb88320), as Checksum.ts calls it from 1 KiB on. */
inline uint32_t Crc32(uint32_t crc, const uint8_t* p, size_t n) {
  static const struct Table {
    uint32_t t[256];
    Table() {
      for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
        t[i] = c;
      }
    }
  } table;
  crc = ~crc;
  for (size_t i = 0; i < n; i++) crc = table.t[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

/**
 * The checksum a committed block's header says it must have (Checksum.ts blockDamage): over the
 * header alone for an unsealed raw block, Murmur3-32 below kNativeChecksumFrom, CRC32 above.
 * `h` is the header, followed in memory by the payload's `length` bytes.
 */
inline uint32_t CommittedSum(const uint32_t* h, uint32_t kind, uint32_t flags) {
  const uint32_t size = h[0], length = h[2];
  const uint32_t checked = h[1] & ~(kStateMask << kStateShift);
  if (kind == kKindRaw && (flags & kFlagSealed) == 0) return HeaderChecksum(size, checked, length);
  if (length < kNativeChecksumFrom) return BlockChecksum(h + 4, size, checked, length);
  const uint32_t seed = ((size ^ 0x9747b28cu) * 0x85ebca6bu) ^ (checked * 0xc2b2ae35u) ^ length;
  return Crc32(seed, reinterpret_cast<const uint8_t*>(h + 4), length);
}
}  // namespace block_format

class PileNative : public Napi::Addon<PileNative> {
 public:
  PileNative(Napi::Env env, Napi::Object exports) {
    Napi::Object advice = Napi::Object::New(env);
    advice.Set("NORMAL", MADV_NORMAL);
    advice.Set("RANDOM", MADV_RANDOM);
    advice.Set("SEQUENTIAL", MADV_SEQUENTIAL);
    advice.Set("WILLNEED", MADV_WILLNEED);
    advice.Set("DONTNEED", MADV_DONTNEED);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    advice.Set("HUGEPAGE", MADV_HUGEPAGE);
#else
    // No transparent huge pages to ask for: the advice that changes nothing.
    advice.Set("HUGEPAGE", MADV_NORMAL);
#endif
    Napi::Object mutex = Napi::Object::New(env);
    mutex.Set("LOCKED", kLocked);
    mutex.Set("OWNER_DEAD", kOwnerDead);
    mutex.Set("BUSY", kBusy);
    mutex.Set("TIMED_OUT", kTimedOut);
    mutex.Set("SIZE", static_cast<double>(sizeof(pthread_mutex_t)));
    mutex.Freeze();
    DefineAddon(exports, {
      InstanceValue("Mapping", Mapping::Define(env), napi_enumerable),
      InstanceValue("SharedMapping", SharedMapping::Define(env), napi_enumerable),
      InstanceValue("SharedMutex", SharedMutex::Define(env), napi_enumerable),
      InstanceValue("Futex", Futex::Define(env), napi_enumerable),
      InstanceValue("ADVICE", advice, napi_enumerable),
      InstanceValue("MUTEX", mutex, napi_enumerable),
      InstanceValue("pageSize", Napi::Number::New(env, static_cast<double>(PageSize())), napi_enumerable),
      InstanceMethod<&PileNative::Reserve>("reserve", napi_enumerable),
      InstanceMethod<&PileNative::PopulateSupportedFn>("populateSupported", napi_enumerable),
      InstanceMethod<&PileNative::PopulateReadSupportedFn>("populateReadSupported", napi_enumerable),
      InstanceMethod<&PileNative::OfdLock>("ofdLock", napi_enumerable),
      InstanceMethod<&PileNative::OfdHolder>("ofdHolder", napi_enumerable),
      InstanceMethod<&PileNative::PlainRecords>("plainRecords", napi_enumerable),
      InstanceMethod<&PileNative::PlainFile>("plainFile", napi_enumerable),
    });
  }

 private:
  /**
   * reserve(fd, length): gives the file `length` bytes of allocated disk blocks
   * (posix_fallocate), so writing through a shared mapping never meets a hole the file system
   * would have to allocate on a page fault. Returns 0 or the errno; EOPNOTSUPP, ENOSYS or EINVAL
   * where the file system can not reserve (the caller then writes the file full instead).
   */
  Napi::Value Reserve(const Napi::CallbackInfo& info) {
    uint64_t length = 0;
    if (info.Length() != 2 || !info[0].IsNumber() || !ToSize(info[1], &length)) {
      throw Napi::TypeError::New(info.Env(), "reserve(fd: integer, length: integer >= 0)");
    }
    const int fd = info[0].As<Napi::Number>().Int32Value();
#if defined(__linux__) || defined(__FreeBSD__)
    int err;
    do err = posix_fallocate(fd, 0, static_cast<off_t>(length)); while (err == EINTR);
    return Napi::Number::New(info.Env(), err);
#else
    return Napi::Number::New(info.Env(), EOPNOTSUPP);
#endif
  }

  /**
   * plainRecords(words, base, off, end, segmentSize, out): from the block at segment offset `off`
   * on, steps over committed data records whose header and checksum hold (what core's PlainRegions
   * walk accepts, in C++: that walk, run cold at an open, spent milliseconds interpreting and
   * compiling its loop), and stops at the first block it does not accept: any other block, a record
   * of kNativeChecksumFrom bytes or more, one that fails a check, or one that ends past `end`.
   * `words` views the segment's bytes from offset `base` on (a window, or the whole segment with
   * base 0). Writes to `out`: the offset it stopped at, the records, the sum of their sizes, the
   * sum of their lengths. It only reads.
   */
  Napi::Value PlainRecords(const Napi::CallbackInfo& info) {
    using namespace block_format;
    Napi::Env env = info.Env();
    uint64_t base, off, end, segment_size;
    if (info.Length() != 6 || !info[0].IsTypedArray() || info[0].As<Napi::TypedArray>().TypedArrayType() != napi_uint32_array ||
        !ToSize(info[1], &base) || !ToSize(info[2], &off) || !ToSize(info[3], &end) || !ToSize(info[4], &segment_size) ||
        !info[5].IsTypedArray() || info[5].As<Napi::TypedArray>().TypedArrayType() != napi_float64_array ||
        info[5].As<Napi::TypedArray>().ElementLength() < 4) {
      throw Napi::TypeError::New(env, "plainRecords(words: Uint32Array, base: integer, off: integer, end: integer, segmentSize: integer, out: Float64Array(4))");
    }
    Napi::Uint32Array words = info[0].As<Napi::Uint32Array>();
    const uint64_t bytes = static_cast<uint64_t>(words.ElementLength()) * 4;
    if (off < base || (off & 7) != 0 || end < base || end - base > bytes || end > segment_size || segment_size > 0xffffffffu) {
      throw Napi::RangeError::New(env, "plainRecords: off and end must lie in the words given, off 8-aligned, end within the segment");
    }
    const uint32_t* w = words.Data();
    uint64_t count = 0, allocated = 0, utilized = 0;
    while (off + kHeaderSize <= end) {
      const uint32_t* h = w + ((off - base) >> 2);
      const uint32_t size = h[0], w1 = h[1], length = h[2];
      if (size < kMinBlockSize || (size & 7) != 0 || size > segment_size - off || off + size > end) break;
      if (((w1 >> kStateShift) & kStateMask) != kStateUsed) break;
      const uint32_t kind = (w1 >> kKindShift) & kKindMask;
      const uint32_t flags = w1 >> kFlagShift;
      if (kind == 0 || kind > kKindBuffer || (kind >= kKindLink && kind <= kKindJournal) || (flags & kFlagBody) != 0) break;
      if (length > size - kHeaderSize) break;
      const uint32_t checked = w1 & ~(kStateMask << kStateShift);
      uint32_t sum;
      if (kind == kKindRaw && (flags & kFlagSealed) == 0) sum = HeaderChecksum(size, checked, length);
      else if (length >= kNativeChecksumFrom) break;
      else sum = BlockChecksum(h + 4, size, checked, length);
      if (sum != h[3]) break;
      count++;
      allocated += size;
      utilized += length;
      off += size;
    }
    Napi::Float64Array out = info[5].As<Napi::Float64Array>();
    out[0] = static_cast<double>(off);
    out[1] = static_cast<double>(count);
    out[2] = static_cast<double>(allocated);
    out[3] = static_cast<double>(utilized);
    return env.Undefined();
  }

  /**
   * plainFile(fd, from, segmentSize, label): the walk of core's PlainRegions over one region of a
   * segment that is not mapped, from segment offset `from` to its end, reading the file with pread
   * in chunks of kFileChunk bytes: mapping a 256 MiB segment to walk it costs a page fault per 4 KiB
   * page (65,536 of them, more than the walk itself), and V8 counts the mapping as external memory.
   * It accepts what PlainRegions accepts without help: committed data records whose kind, length and
   * checksum hold (CRC32 included), and free or reserved blocks whose own check words hold, which it
   * merges into runs. Returns a Float64Array: [status, offset, blocks, objects, allocated bytes,
   * utilized bytes, runs, inner], then per run kRunFields numbers (start, end, generation, first and
   * end index of its inner blocks, then the run's first block as the file held it: its four header
   * words and its two links), then the inner blocks' offsets (blocks merged into a run after its
   * first). Status 0: the region was walked to its end; 1: stopped at `offset`, at a block it does not
   * accept (the caller walks the region again through the mapped segment, where core's own checks
   * decide); 2: the file ended early. It only reads.
   */
  Napi::Value PlainFile(const Napi::CallbackInfo& info) {
    using namespace block_format;
    Napi::Env env = info.Env();
    uint64_t from, segment_size;
    if (info.Length() != 4 || !info[0].IsNumber() || !ToSize(info[1], &from) || !ToSize(info[2], &segment_size) || !info[3].IsString()) {
      throw Napi::TypeError::New(env, "plainFile(fd: integer, from: integer, segmentSize: integer, label: string)");
    }
    if ((from & 7) != 0 || from > segment_size || segment_size > 0xffffffffu) {
      throw Napi::RangeError::New(env, "plainFile: from must be 8-aligned and within the segment, the segment at most 4 GiB");
    }
    const int fd = info[0].As<Napi::Number>().Int32Value();
    const std::string label = info[3].As<Napi::String>().Utf8Value();
    // File bytes [base, base + have) are in buf, base a multiple of 4096 so that words stay aligned.
    std::vector<uint32_t> buf;
    uint64_t base = 0, have = 0;
    int read_error = 0;
    bool short_read = false;
    // Makes bytes [at, at + need) of the file present in buf; false on a read error or a short file.
    auto load = [&](uint64_t at, uint64_t need) -> bool {
      base = at & ~static_cast<uint64_t>(4095);
      uint64_t want = at - base + need;
      if (want < kFileChunk) want = kFileChunk;
      if (want > segment_size - base) want = segment_size - base;
      if (buf.size() * 4 < want) buf.resize((want + 3) / 4);
      uint8_t* dst = reinterpret_cast<uint8_t*>(buf.data());
      have = 0;
      while (have < want) {
        const ssize_t n = pread(fd, dst + have, want - have, static_cast<off_t>(base + have));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
          read_error = errno;
          return false;
        }
        if (n == 0) break;
        have += static_cast<uint64_t>(n);
      }
      if (have < at - base + need) {
        short_read = true;
        return false;
      }
      return true;
    };
    std::vector<double> runs, inner;
    uint64_t off = from, blocks = 0, objects = 0, allocated = 0, utilized = 0;
    int status = 0;
    int64_t run_start = -1;
    uint32_t run_gen = 0;
    size_t run_first_inner = 0;
    double first[6] = {0, 0, 0, 0, 0, 0};
    auto close_run = [&](uint64_t end) {
      runs.insert(runs.end(), {static_cast<double>(run_start), static_cast<double>(end), static_cast<double>(run_gen),
                               static_cast<double>(run_first_inner), static_cast<double>(inner.size())});
      runs.insert(runs.end(), first, first + 6);
      run_start = -1;
    };
    while (off < segment_size) {
      // A header, and for a free block its links: the 32 bytes every block has.
      if (off < base || off + kMinBlockSize > base + have) {
        if (off + kMinBlockSize > segment_size || !load(off, kMinBlockSize)) {
          status = read_error != 0 || short_read ? 2 : 1;
          break;
        }
      }
      const uint32_t* h = buf.data() + ((off - base) >> 2);
      const uint32_t size = h[0], w1 = h[1];
      blocks++;
      if (size < kMinBlockSize || (size & 7) != 0 || size > segment_size - off) {
        status = 1;
        break;
      }
      const uint32_t state = (w1 >> kStateShift) & kStateMask;
      if (state == kStateUsed) {
        const uint32_t kind = (w1 >> kKindShift) & kKindMask;
        const uint32_t flags = w1 >> kFlagShift;
        const uint32_t length = h[2];
        if (kind == 0 || kind > kKindBuffer || (kind >= kKindLink && kind <= kKindJournal) || (flags & kFlagBody) != 0 ||
            length > size - kHeaderSize) {
          status = 1;
          break;
        }
        if (off + kHeaderSize + length > base + have) {
          if (!load(off, kHeaderSize + length)) {
            status = 2;
            break;
          }
          h = buf.data() + ((off - base) >> 2);
        }
        if (CommittedSum(h, kind, flags) != h[3]) {
          status = 1;
          break;
        }
        if (run_start >= 0) close_run(off);
        objects++;
        allocated += size;
        utilized += length;
      } else if (state == kStateDamaged) {
        status = 1;
        break;
      } else {
        // Free or reserved: merged by the size its own check words confirm. When they do not
        // hold, confirming a size reads anywhere in the segment: left to the caller.
        const uint32_t gen = w1 & kGenMask;
        if (h[2] != ~size || h[3] != ~gen) {
          status = 1;
          break;
        }
        if (run_start < 0) {
          run_start = static_cast<int64_t>(off);
          run_gen = gen;
          run_first_inner = inner.size();
          double next, prev;
          std::memcpy(&next, h + 4, 8);
          std::memcpy(&prev, h + 6, 8);
          first[0] = h[0], first[1] = h[1], first[2] = h[2], first[3] = h[3], first[4] = next, first[5] = prev;
        } else {
          inner.push_back(static_cast<double>(off));
          if (gen > run_gen) run_gen = gen;
        }
      }
      off += size;
    }
    if (status == 0 && run_start >= 0) close_run(segment_size);
    if (read_error != 0) throw ErrnoError(env, read_error, "pread", label, static_cast<double>(off));
    const size_t n_runs = runs.size() / kRunFields;
    Napi::Float64Array out = Napi::Float64Array::New(env, 8 + runs.size() + inner.size());
    double* o = out.Data();
    o[0] = status;
    o[1] = static_cast<double>(off);
    o[2] = static_cast<double>(blocks);
    o[3] = static_cast<double>(objects);
    o[4] = static_cast<double>(allocated);
    o[5] = static_cast<double>(utilized);
    o[6] = static_cast<double>(n_runs);
    o[7] = static_cast<double>(inner.size());
    std::copy(runs.begin(), runs.end(), o + 8);
    std::copy(inner.begin(), inner.end(), o + 8 + runs.size());
    return out;
  }

  Napi::Value PopulateSupportedFn(const Napi::CallbackInfo& info) {
    return Napi::Boolean::New(info.Env(), Mapping::PopulateSupported());
  }
  Napi::Value PopulateReadSupportedFn(const Napi::CallbackInfo& info) {
    return Napi::Boolean::New(info.Env(), PopulateReadSupported());
  }

  /** The arguments of ofdLock/ofdHolder: (fd, start, length, mode, label?) into a struct flock. */
  static int OfdArgs(const Napi::CallbackInfo& info, const char* usage, bool unlock_ok, struct flock* fl, std::string* label) {
    uint64_t start = 0, length = 0;
    if (info.Length() < 4 || !info[0].IsNumber() || !ToSize(info[1], &start) || !ToSize(info[2], &length) || !info[3].IsString() ||
        (info.Length() > 4 && !info[4].IsString() && !info[4].IsUndefined())) {
      throw Napi::TypeError::New(info.Env(), usage);
    }
    const std::string mode = info[3].As<Napi::String>().Utf8Value();
    std::memset(fl, 0, sizeof(*fl));  // l_pid must be 0 for an OFD lock
    if (mode == "read") fl->l_type = F_RDLCK;
    else if (mode == "write") fl->l_type = F_WRLCK;
    else if (mode == "unlock" && unlock_ok) fl->l_type = F_UNLCK;
    else throw Napi::TypeError::New(info.Env(), usage);
    fl->l_whence = SEEK_SET;
    fl->l_start = static_cast<off_t>(start);
    fl->l_len = static_cast<off_t>(length);
    if (info.Length() > 4 && info[4].IsString()) *label = info[4].As<Napi::String>().Utf8Value();
    return info[0].As<Napi::Number>().Int32Value();
  }

  /**
   * ofdLock(fd, start, length, mode, label?): F_OFD_SETLK: takes ('read', 'write') or drops
   * ('unlock') the lock of this open file description on the bytes [start, start + length)
   * (length 0: to the end of the file, however it grows). True when done, false when another open
   * file description holds a conflicting lock. Never waits.
   */
  Napi::Value OfdLock(const Napi::CallbackInfo& info) {
    struct flock fl;
    std::string label;
    const int fd = OfdArgs(info, "ofdLock(fd: integer, start: integer >= 0, length: integer >= 0, mode: 'read' | 'write' | 'unlock', label?: string)", true, &fl, &label);
#if defined(__linux__)
    // Through syscall(): glibc's fcntl is fcntl64@GLIBC_2.28 when built with 64-bit offsets.
    if (syscall(SYS_fcntl, fd, F_OFD_SETLK, &fl) == 0) return Napi::Boolean::New(info.Env(), true);
    const int err = errno;
    if (err == EAGAIN || err == EACCES) return Napi::Boolean::New(info.Env(), false);
    throw ErrnoError(info.Env(), err, "fcntl(F_OFD_SETLK)", label, static_cast<double>(fl.l_start));
#else
    throw ErrnoError(info.Env(), ENOSYS, "fcntl(F_OFD_SETLK)", label, static_cast<double>(fl.l_start));
#endif
  }

  /**
   * ofdHolder(fd, start, length, mode, label?): F_OFD_GETLK: null when a lock of `mode` on those
   * bytes would be granted to this open file description, else the first conflicting lock:
   * { mode, start, length, pid } (pid -1 for an OFD lock, whose owner is no process).
   */
  Napi::Value OfdHolder(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    struct flock fl;
    std::string label;
    const int fd = OfdArgs(info, "ofdHolder(fd: integer, start: integer >= 0, length: integer >= 0, mode: 'read' | 'write', label?: string)", false, &fl, &label);
#if defined(__linux__)
    const double start = static_cast<double>(fl.l_start);
    if (syscall(SYS_fcntl, fd, F_OFD_GETLK, &fl) != 0) throw ErrnoError(env, errno, "fcntl(F_OFD_GETLK)", label, start);
    if (fl.l_type == F_UNLCK) return env.Null();
    Napi::Object holder = Napi::Object::New(env);
    holder.Set("mode", fl.l_type == F_WRLCK ? "write" : "read");
    holder.Set("start", static_cast<double>(fl.l_start));
    holder.Set("length", static_cast<double>(fl.l_len));
    holder.Set("pid", static_cast<double>(fl.l_pid));
    return holder;
#else
    throw ErrnoError(env, ENOSYS, "fcntl(F_OFD_GETLK)", label, static_cast<double>(fl.l_start));
#endif
  }
};

}  // namespace

NODE_API_ADDON(PileNative)
