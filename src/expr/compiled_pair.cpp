#include "expr/compiled_pair.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <sstream>

#include "declared_toolchain.hpp"
#include "io/checksum.hpp"
#include "tether/engine/catalog.hpp"

extern char** environ;

namespace tether {

namespace fs = std::filesystem;

namespace {

constexpr const char* entry_symbol = "tether_declared_pair";
constexpr const char* where = "system.declare";

std::string read_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_text(const fs::path& file, const std::string& text) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) throw ConfigError(where, "cannot write " + file.string() + " (the cache of compiled systems)");
}

// The file of the tether binary (the command, the Python module, or a
// program linking the engine) whose engine the library calls.
std::string host_binary() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(&declared_pair), &info) == 0 || info.dli_fname == nullptr)
    throw std::runtime_error("dladdr cannot name the binary that holds tether's engine");
  // The command's own name may be relative, or only what PATH found: then /proc/self/exe.
  std::error_code ec;
  const fs::path path = fs::canonical(info.dli_fname, ec);
  return ec ? fs::canonical("/proc/self/exe").string() : path.string();
}

// What a library's code depends on beyond its own unit and flags: the
// headers it is compiled against, every header of the compile tree by path,
// size and time of change (the tree's .cpp and .cu files are the host's own
// units, which no pair includes). The engine symbols it calls are declared
// there, so every binary of one build (the command, the Python module)
// shares a library, and a changed header makes a new one.
std::string tree_identity(const std::vector<fs::path>& tree) {
  std::vector<std::string> files;
  for (const fs::path& dir : tree)
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
      struct stat st {};
      const fs::path ext = e.path().extension();
      if (ext == ".cpp" || ext == ".cu" || !e.is_regular_file() || ::stat(e.path().c_str(), &st) != 0) continue;
      files.push_back(e.path().string() + " " + std::to_string(st.st_size) + " " + std::to_string(st.st_mtim.tv_sec) +
                      "." + std::to_string(st.st_mtim.tv_nsec));
    }
  std::sort(files.begin(), files.end());  // the directory's order is the file system's
  std::string all;
  for (const std::string& f : files) all += f + "\n";
  return all;
}

fs::path cache_folder() {
  if (const char* d = std::getenv("TETHER_CACHE_DIR"); d != nullptr && *d != 0) return fs::path(d) / "declared";
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d != nullptr && *d != 0) return fs::path(d) / "tether" / "declared";
  if (const char* d = std::getenv("HOME"); d != nullptr && *d != 0) return fs::path(d) / ".cache" / "tether" / "declared";
  throw ConfigError(where, "has nowhere to keep its compiled library: set TETHER_CACHE_DIR (or HOME)");
}

// 64-bit FNV-1a, as 16 hex digits: the entry's folder name. The entry also
// keeps the whole key, compared before use, so that two keys of one hash
// never share a library.
std::string hash_hex(const std::string& text) {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

const char* engine_name(PairEngine engine) {
  return engine == PairEngine::run ? "run" : engine == PairEngine::shoot ? "shoot" : "sample";
}

// The compiler runs in a process group of its own, and a signal that ends
// tether while it runs (timeout's SIGTERM, Ctrl-C, a hangup) ends the whole
// group first: the driver's cc1plus had outlived a killed tether, once for
// 73 minutes and 14 GB. Then the signal does what it did before.
std::atomic<pid_t> compiling_group{0};
constexpr int ending_signals[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};
struct sigaction previous_actions[std::size(ending_signals)];

extern "C" void end_compiler_then_reraise(int sig) {
  if (const pid_t group = compiling_group.load(); group > 0) ::kill(-group, SIGKILL);
  for (std::size_t k = 0; k < std::size(ending_signals); ++k)
    if (ending_signals[k] == sig) ::sigaction(sig, &previous_actions[k], nullptr);
  ::raise(sig);
}

// Runs the compiler (argv only: no shell sees anything), its output into `log`.
int compile(const std::vector<std::string>& args, const fs::path& log) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes, 0);  // a group of its own, named by the compiler's pid
  struct sigaction ending {};
  ending.sa_handler = end_compiler_then_reraise;
  sigemptyset(&ending.sa_mask);
  for (std::size_t k = 0; k < std::size(ending_signals); ++k) ::sigaction(ending_signals[k], &ending, &previous_actions[k]);
  pid_t pid = 0;
  const int err = posix_spawn(&pid, argv[0], &actions, &attributes, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  int status = 0;
  if (err == 0) {
    compiling_group = pid;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    compiling_group = 0;
  }
  for (std::size_t k = 0; k < std::size(ending_signals); ++k) ::sigaction(ending_signals[k], &previous_actions[k], nullptr);
  if (err != 0) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

// The first lines of the compiler's messages that say "error".
std::string first_errors(const fs::path& log) {
  std::ifstream in(log);
  std::string line, out;
  int n = 0;
  while (n < 5 && std::getline(in, line))
    if (line.find("error") != std::string::npos) out += "\n  " + line, ++n;
  return out;
}

// An exclusive flock on `file`, released when it goes out of scope.
class EntryLock {
 public:
  explicit EntryLock(const fs::path& file) {
    fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd_ < 0)
      throw ConfigError(where, "cannot open " + file.string() + " (the cache's lock): " + std::strerror(errno));
    while (::flock(fd_, LOCK_EX) != 0)
      if (errno != EINTR) throw ConfigError(where, "cannot lock " + file.string() + ": " + std::strerror(errno));
  }
  ~EntryLock() { ::close(fd_); }
  EntryLock(const EntryLock&) = delete;
  EntryLock& operator=(const EntryLock&) = delete;

 private:
  int fd_ = -1;
};

// The library `so`, whose seal `seal` records its bytes and CRC-32, loaded;
// null (and `why` says why) when it fails its seal or does not load.
const DeclaredPair* load(const fs::path& so, const fs::path& seal, std::string& why) {
  std::uint32_t crc = 0;
  nlohmann::json record;
  try {
    record = nlohmann::json::parse(read_text(seal));
  } catch (const nlohmann::json::exception&) {
    why = "its seal is missing or damaged";
    return nullptr;
  }
  if (!matches_record(so, record, crc) || fs::file_size(so) != record.value("bytes", std::uintmax_t(0))) {
    why = "it does not match its seal";
    return nullptr;
  }
  void* handle = ::dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    why = std::string("it does not load: ") + ::dlerror();
    return nullptr;
  }
  using Entry = const DeclaredPair* (*)();
  const auto f = reinterpret_cast<Entry>(::dlsym(handle, entry_symbol));
  if (f == nullptr) {
    why = std::string("it has no ") + entry_symbol;
    ::dlclose(handle);
    return nullptr;
  }
  return f();  // the handle stays open: the engine calls into it until the process ends
}

}  // namespace

namespace {

// tether's headers a pair compiles against (src, include, generated), for the engine in `host_path`.
std::vector<fs::path> compile_tree(const std::string& host_path) {
  const auto holds_tree = [](const fs::path& src, const fs::path& generated) {
    return fs::exists(src / "engine" / "for_pair.hpp") && fs::exists(generated / "declared_toolchain.hpp");
  };
  std::vector<fs::path> tree;
  // An installed tether: the headers installed beside it.
  for (const char* relative : declared_toolchain::installed_trees) {
    std::error_code ec;
    const fs::path root = fs::weakly_canonical(fs::path(host_path).parent_path() / relative, ec);
    if (!ec && holds_tree(root / "src", root / "generated")) {
      tree = {root / "src", root / "include", root / "generated"};
      if (fs::is_directory(root / "third_party")) tree.push_back(root / "third_party");  // Eigen's, nlohmann's
      break;
    }
  }
  // A binary of the build folder, or a program linking its engine library: the build folder's.
  const fs::path build = declared_toolchain::build_dir, sources = declared_toolchain::source_dir;
  if (tree.empty() && holds_tree(sources / "src", build / "generated"))
    tree = {sources / "src", sources / "include", build / "generated"};
  if (tree.empty())
    throw ConfigError(where, "a declared system is compiled against tether's headers, which are neither installed "
                             "beside " + host_path + " (" + declared_toolchain::installed_trees[0] + " or " +
                             declared_toolchain::installed_trees[1] + " from its folder) nor in the folders it was "
                             "built from (" + sources.string() + ", " + build.string() + "): install tether again "
                             "(cmake --install, or pip install .)");
  return tree;
}

// The first lines of a unit generated for the pair: what it is, the method's header, `includes`.
std::string unit_head(const DeclaredSystem& d, int method, const std::string& what, const std::string& includes) {
  return "// Generated by tether: the declared system \"" + d.name + "\" with " +
         method_infos().at(std::size_t(method)).name + ", " + what + " (src/expr/compiled_pair.hpp).\n#include \"" +
         declared_toolchain::method_headers[method] + "\"\n" + includes + "\n" + d.source("UserSystem") +
         "\nnamespace tether {\nusing DeclaredMethod = " + declared_toolchain::method_types[method] + ";\n";
}

// tether's include folders for the engine in `host_path`, then `toolchain`'s flags.
template <std::size_t N>
std::vector<std::string> with_tree(const std::string& host_path, const char* const (&toolchain)[N]) {
  std::vector<std::string> flags;
  for (const fs::path& dir : compile_tree(host_path)) flags.push_back("-I" + dir.string());
  flags.insert(flags.end(), toolchain, toolchain + N);
  return flags;
}

}  // namespace

std::vector<std::string> declared_compile_flags(const std::string& host_path) {
  return with_tree(host_path, declared_toolchain::flags);
}

std::vector<std::string> declared_cuda_compile_flags(const std::string& host_path) {
  return with_tree(host_path, declared_toolchain::cuda_flags);
}

std::string declared_pair_cuda_source(const DeclaredSystem& d, int method, PairEngine engine) {
  const char* const instantiate = engine == PairEngine::run     ? "TETHER_INSTANTIATE_CUDA_RUN"
                                  : engine == PairEngine::shoot ? "TETHER_INSTANTIATE_CUDA_SHOOT"
                                                                : "TETHER_INSTANTIATE_CUDA_SAMPLE";
  return unit_head(d, method, std::string("the CUDA kernels of `tether ") + engine_name(engine) + "`",
                   "#include \"backends/cuda/instantiate_pair.cuh\"\n") +
         "}  // namespace tether\n" + instantiate + "(::tether::UserSystem, ::tether::DeclaredMethod)\n";
}

std::string declared_pair_source(const DeclaredSystem& d, int method, PairEngine engine) {
  const char* const pair = "<UserSystem, DeclaredMethod>";
  std::ostringstream entry;  // PairEntry{run, shoot, sample}, the engine's alone
  entry << "PairEntry{" << (engine == PairEngine::run ? std::string("&run_pair") + pair : "nullptr") << ", "
        << (engine == PairEngine::shoot ? std::string("&shoot_pair") + pair : "nullptr") << ", "
        << (engine == PairEngine::sample ? std::string("&sample_pair") + pair : "nullptr") << "}";
  std::ostringstream o;
  o << unit_head(d, method, std::string("for `tether ") + engine_name(engine) + "`, compiled when first used",
                 "#include \"engine/for_pair.hpp\"\n#include \"engine/initial_state.hpp\"\n"
                 "#include \"expr/compiled_pair.hpp\"\n")
    << "static_assert(MethodFor<DeclaredMethod, UserSystem>, \"the registry pairs this method with declared systems\");\n"
    << "namespace {\n";
  if (engine == PairEngine::run)
    o << "void check(const RunConfig& c) {\n"
      << "  check_initial_states(configured<UserSystem>(c.system_parameters, \"system.parameters\"), c);\n"
      << "}\n"
      << "const DeclaredPair pair{" << entry.str() << ", &check};\n";
  else
    o << "const DeclaredPair pair{" << entry.str() << ", nullptr};\n";
  o << "}  // namespace\n"
    << "}  // namespace tether\n\n"
    << "extern \"C\" const tether::DeclaredPair* " << entry_symbol << "() { return &tether::pair; }\n";
  return o.str();
}

const DeclaredPair& declared_pair(const DeclaredSystem& d, int method, PairEngine engine,
                                  [[maybe_unused]] const std::string& backend) {
  static std::mutex mutex;
  static std::map<std::string, const DeclaredPair*> loaded;  // by key, for the life of the process
  const std::lock_guard<std::mutex> guard(mutex);

  const std::string source = declared_pair_source(d, method, engine);
  const std::string host_path = host_binary();
  std::vector<std::string> flags = declared_compile_flags(host_path);
  // The cuda backend's library also holds the engine's kernels, compiled by
  // nvcc into an object linked into it; the host libraries do without (a cpu
  // run does not wait for nvcc), so the host unit is told which it is.
#ifdef TETHER_HAVE_CUDA
  const bool cuda = backend == "cuda";
#else
  const bool cuda = false;  // resolve_backend refused cuda: this build does not run it
#endif
  std::string cuda_source;
  std::vector<std::string> cuda_flags;
  if (cuda) {
    flags.push_back("-DTETHER_HAVE_CUDA");
    cuda_source = declared_pair_cuda_source(d, method, engine);
    cuda_flags = declared_cuda_compile_flags(host_path);
  }
  std::string key = source + "\n// compiler: " + declared_toolchain::compiler;
  for (const std::string& f : flags) key += " " + f;
  if (cuda) {
    key += "\n// its CUDA unit:\n" + cuda_source + "\n// nvcc: " + declared_toolchain::cuda_compiler;
    for (const std::string& f : cuda_flags) key += " " + f;
  }
  key += "\n// against the headers:\n" + tree_identity(compile_tree(host_path));
  if (const auto it = loaded.find(key); it != loaded.end()) return *it->second;

  // The library resolves the engine's symbols in the binary that loads it;
  // a Python module is loaded with its symbols private, so they are made
  // global first (the tether command exports its own).
  ::dlopen(host_path.c_str(), RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);

  const fs::path root = cache_folder();
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) throw ConfigError(where, "cannot make " + root.string() + " (the cache of compiled systems): " + ec.message());
  const std::string name = hash_hex(key);
  const fs::path entry = root / name, so = entry / "pair.so", seal = entry / "pair.so.seal",
                 cpp = entry / "pair.cpp", log = entry / "compile.log", key_file = entry / "key.txt";
  const EntryLock lock(root / (name + ".lock"));

  std::string why;
  if (fs::exists(key_file) && read_text(key_file) == key)
    if (const DeclaredPair* p = load(so, seal, why)) return *(loaded[key] = p);

  // Not here (or stale, damaged, another key's): compiled anew, in a fresh folder.
  fs::remove_all(entry, ec);
  fs::create_directories(entry, ec);
  if (ec) throw ConfigError(where, "cannot make " + entry.string() + ": " + ec.message());
  if (::access(declared_toolchain::compiler, X_OK) != 0)
    throw ConfigError(where, std::string("a declared system is compiled when first used, with ") +
                                 declared_toolchain::compiler + ", the compiler tether was built with, which is not "
                                 "here: install it (Debian: apt-get install g++) or rebuild tether");
  write_text(cpp, source);
  std::vector<std::string> args{declared_toolchain::compiler};
  for (const std::string& f : flags) args.push_back(f);
  const fs::path partial = entry / "pair.so.partial";
  args.insert(args.end(), {"-o", partial.string(), cpp.string()});
  const std::string what = d.builtin_type.empty() ? d.name : d.builtin_type;  // "Chain<5>": the size is the news
  std::fprintf(stderr, "tether: compiling %s with %s for %s%s (first use; kept in %s)\n", what.c_str(),
               method_infos().at(std::size_t(method)).name.c_str(), engine_name(engine), cuda ? " on cuda" : "",
               entry.c_str());
  const auto start = std::chrono::steady_clock::now();
  if (cuda) {
    if (::access(declared_toolchain::cuda_compiler, X_OK) != 0)
      throw ConfigError(where, std::string("a declared system runs on cuda once its kernels are compiled, with ") +
                                   declared_toolchain::cuda_compiler + ", the nvcc tether was built with, which is "
                                   "not here: install the CUDA toolkit there, or use the cpu backend");
    const fs::path cu = entry / "pair.cu", object = entry / "pair_cuda.o", cuda_log = entry / "compile_cuda.log";
    write_text(cu, cuda_source);
    std::vector<std::string> nvcc{declared_toolchain::cuda_compiler};
    for (const std::string& f : cuda_flags) nvcc.push_back(f);
    nvcc.insert(nvcc.end(), {"-Xcompiler=-fPIC", "-c", "-o", object.string(), cu.string()});
    if (const int rc = compile(nvcc, cuda_log); rc != 0)
      throw ConfigError(where, "nvcc failed (exit " + std::to_string(rc) + ") on the CUDA unit generated from this "
                               "declaration, kept with its messages in " + entry.string() +
                               " (pair.cu, compile_cuda.log):" + first_errors(cuda_log));
    // The CUDA runtime's symbols resolve in the binary that loads the library, as the engine's do: one runtime.
    args.push_back(object.string());
  }
  const int rc = compile(args, log);
  if (rc != 0)
    throw ConfigError(where, "the compiler failed (exit " + std::to_string(rc) + ") on the source generated from "
                             "this declaration, kept with its messages in " + entry.string() +
                             " (pair.cpp, compile.log):" + first_errors(log));
  std::uint32_t crc = 0;
  const std::uintmax_t bytes = fs::file_size(partial);
  file_crc32(partial, bytes, crc);
  fs::rename(partial, so);
  write_text(seal, file_record(bytes, crc).dump());
  write_text(key_file, key);
  std::fprintf(stderr, "tether: compiled in %.1f s\n",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  const DeclaredPair* p = load(so, seal, why);
  if (p == nullptr) throw ConfigError(where, "the library compiled for it, " + so.string() + ", " + why);
  return *(loaded[key] = p);
}

}  // namespace tether
