// t-MEM-NN training step on the CPU: polar escort draw (docs/method.md §4.2, D 61-62) and the
// (D 56) t-divergence of n stacked Student-t matrices, forward and backward, in one autograd node.
//
// The same maths as fairseq_acvi/modules/student_t/fused.py (_PosteriorStep with sampler "polar"),
// which is the reference this kernel is tested against (tests/test_cpu_kernel.py):
//
//   per matrix i:  nu = exp(clamp(log_nu, -7, 12)) + 1e-3,   a = 2/(nu+1),
//                  e = exp(-a log c_nu),  B = (1 + 1/nu) e,  inv = 1/(1-t) = -(1+nu)/2
//   per element:   sigma = softplus(rho) + 1e-6,   c = cos(2 pi u0),  E = max(-log1p(-u1), 1e-20)
//                  x = 2E/(nu+2),  zr = c sqrt(nu expm1(x)),  Theta = keep (mu + sigma zr)
//   divergence:    D = sum_i inv_i [B_i S1_i - P_i (N + S2_i / p_i)]
//                  S1 = sum keep sigma^a,  S2 = sum keep (sigma^2 + mu^2)
//                  tied: P = e, p = nu;  seed: p = prior dof, P = Psi_p (D 58)
//
// The uniforms (u0, u1) of element k are a counter-based hash of (seed, k) (SplitMix64; 24-bit
// floats in [0, 1), like torch.rand's), the seed drawn from torch's default CPU generator, so
// torch.manual_seed fixes the draws. The forward keeps two (n, V, d) arrays for the backward,
// dTheta/dsigma and the nu weight of the draw; the backward recomputes the sigma terms from rho
// (cheaper than keeping three more arrays, and it leaves more of the step's data in cache).
//
// Tensors: mu, rho (n, V, d) float32 contiguous; log_nu (n,) float32; keep (V, 1) 0/1 float32.
// Returns Theta (n, V, d) and weight * D (a float32 scalar; the criterion's scale B/N, so the loss
// needs no extra node), plus, for logging, D and the n values of nu as Python floats.
// Elementwise work uses ATen's vectorised math (at::vec, SLEEF: <= 1 ulp; log 3.5 ulp) in float32
// with sums accumulated in double; the per-matrix nu algebra is done in double.
#include <torch/extension.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/cpu/vec/vec.h>

#include <cmath>
#include <cstdint>
#include <mutex>
#include <vector>

namespace {

using Vec = at::vec::Vectorized<float>;
constexpr double kLogNuMin = -7.0, kLogNuMax = 12.0, kNuFloor = 1e-3;
constexpr float kSigmaFloor = 1e-6f, kSoftplusThreshold = 20.0f, kEFloor = 1e-20f;
constexpr double kPi = 3.14159265358979323846;
constexpr int64_t kBlock = 16;  // vectors per chunk of the staged loops

// D and the nu values of the latest forward on this thread (returned for logging)
thread_local double last_divergence = 0;
thread_local std::vector<double> last_nus;

double log_c(double nu) {  // log Gamma((nu+1)/2) - log Gamma(nu/2) - log(pi nu)/2
  return std::lgamma((nu + 1) / 2) - std::lgamma(nu / 2) - 0.5 * std::log(kPi * nu);
}

double digamma(double x) {  // recurrence to x >= 10, then the asymptotic series (as _digamma)
  double r = 0.0;
  while (x < 10.0) {
    r -= 1.0 / x;
    x += 1.0;
  }
  const double f = 1.0 / (x * x);
  const double tail =
      f * (1.0 / 12 - f * (1.0 / 120 - f * (1.0 / 252 - f * (1.0 / 240 - f * (1.0 / 132 - f * 691.0 / 32760)))));
  return r + std::log(x) - 0.5 / x - tail;
}

// Per-matrix scalars (double) shared by the forward and the backward.
struct Matrix {
  double nu, dnu, a, c, e, inv, B, P, p;
  double S1 = 0, S2 = 0, S3 = 0, inner = 0;
};

std::vector<Matrix> matrices(const torch::Tensor& log_nu, double prior_dof) {
  auto ln = log_nu.accessor<float, 1>();
  std::vector<Matrix> out(ln.size(0));
  const bool tied = prior_dof < 0;
  const double P_seed = tied ? 0.0 : std::exp(-2.0 / (prior_dof + 1) * log_c(prior_dof));
  for (int64_t i = 0; i < ln.size(0); ++i) {
    Matrix& m = out[i];
    const double x = ln[i];
    const double ex = std::exp(std::min(std::max(x, kLogNuMin), kLogNuMax));
    m.nu = ex + kNuFloor;
    m.dnu = (x >= kLogNuMin && x <= kLogNuMax) ? ex : 0.0;
    m.a = 2.0 / (m.nu + 1);
    m.c = log_c(m.nu);
    m.e = std::exp(-m.a * m.c);
    m.inv = -(1 + m.nu) / 2;
    m.B = (1 + 1 / m.nu) * m.e;
    m.P = tied ? m.e : P_seed;
    m.p = tied ? m.nu : prior_dof;
  }
  return out;
}

// Sum of the lanes, in double.
inline double hsum(const Vec& v) {
  float buf[Vec::size()];
  v.store(buf);
  double s = 0;
  for (int64_t i = 0; i < Vec::size(); ++i) s += buf[i];
  return s;
}

// log with SLEEF's 3.5-ulp variant where the build has SLEEF (2.3x faster than the 1-ulp one
// at::vec calls); at::vec's log elsewhere.
inline Vec log_fast(const Vec& v) {
#if defined(CPU_CAPABILITY_AVX512)
  return Vec(Sleef_logf16_u35(v));
#elif defined(CPU_CAPABILITY_AVX2)
  return Vec(Sleef_logf8_u35(v));
#else
  return v.log();
#endif
}

// log(1 + t) for t >= 0, accurate where 1 + t rounds (Goldberg's trick: log(w) t / (w - 1),
// w = fl(1 + t)); SLEEF's own log1p is several times slower.
inline Vec log1p_pos(const Vec& t) {
  const Vec one(1.f), w = t + one;
  return Vec::blendv(log_fast(w) * (t / (w - one)), t, w == one);
}

// exp(x) - 1 for x >= 0: the Taylor polynomial to x^8 below 1/2 (truncation < x^8/9! < 2^-24
// relative), exp(x) - 1 above (relative rounding <= e^x/(e^x - 1) ulp < 2.6 ulp). SLEEF's own
// expm1 costs three logs' worth here.
inline Vec expm1_pos(const Vec& x) {
  Vec p(1.f / 40320);
  for (float c : {1.f / 5040, 1.f / 720, 1.f / 120, 1.f / 24, 1.f / 6, 0.5f, 1.f})
    p = at::vec::fmadd(p, x, Vec(c));
  const Vec one(1.f);
  return Vec::blendv(p * x, x.exp() - one, x >= Vec(0.5f));
}

// Zero the lanes at and after `count` (a partial last vector).
inline Vec head(const Vec& v, int64_t count) {
  return count >= Vec::size() ? v : Vec::set(Vec(0.f), v, count);
}


// The two uniforms of elements k0 .. k0 + cnt - 1 (SplitMix64 of seed + (k + 1) * golden gamma:
// its output sequence, a generator that passes BigCrush); top 24 bits of each 32-bit half.
inline void uniforms(uint64_t seed, int64_t k0, int64_t cnt, float* u0, float* u1) {
  for (int64_t j = 0; j < cnt; ++j) {
    uint64_t z = seed + static_cast<uint64_t>(k0 + j + 1) * 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    u0[j] = static_cast<float>(static_cast<uint32_t>(z >> 40)) * 0x1p-24f;
    u1[j] = static_cast<float>(static_cast<uint32_t>(z) >> 8) * 0x1p-24f;
  }
}

// Elementwise terms of up to kBlock vectors of consecutive kept elements (flat indices k0 ..
// k0 + cnt - 1 of the (n, V, d) arrays), one stage at a time: each stage's SLEEF calls are
// independent of each other and overlap in the pipeline (one element's chain of seven calls,
// done alone, would run at their summed latency). sigma_terms needs rho only; noise_terms the
// seed (the forward saves its zr and m for the backward, which recomputes sigma_terms).
struct Chunk {
  static constexpr int64_t L = Vec::size();
  int64_t nv = 0, cnt = 0;
  Vec sig[kBlock], sgm[kBlock], ls[kBlock], pw[kBlock], zr[kBlock], m[kBlock];

  int64_t count(int64_t v) const { return std::min<int64_t>(L, cnt - v * L); }

  void sigma_terms(const float* prho, int64_t k0, int64_t n_el, double a_exp) {
    cnt = n_el;
    nv = (cnt + L - 1) / L;
    const Vec one(1.f), thr(kSoftplusThreshold), floor_s(kSigmaFloor), a(static_cast<float>(a_exp));
    Vec rho[kBlock], t[kBlock];
    for (int64_t v = 0; v < nv; ++v) {
      rho[v] = Vec::loadu(prho + k0 + v * L, count(v));
      t[v] = at::vec::minimum(rho[v], thr).exp();
    }
    for (int64_t v = 0; v < nv; ++v) {  // sigma = softplus(rho) + 1e-6 and dsigma/drho = sigmoid(rho)
      const Vec big = rho[v] > thr;
      sig[v] = Vec::blendv(log1p_pos(t[v]), rho[v], big) + floor_s;
      sgm[v] = Vec::blendv(t[v] / (one + t[v]), one, big);
    }
    for (int64_t v = 0; v < nv; ++v) ls[v] = log_fast(sig[v]);
    for (int64_t v = 0; v < nv; ++v) pw[v] = (ls[v] * a).exp();  // sigma^a
  }

  // zr = c sqrt(nu expm1(x)) (= dTheta/dsigma) and the polar nu weight
  // m = (x / expm1(x)) (expm1(x) + 1) / (2 (nu + 2)), from the uniforms of (seed, k).
  void noise_terms(uint64_t seed, int64_t k0, const Matrix& M) {
    const Vec zero(0.f), one(1.f), floor_e(kEFloor), two_pi(static_cast<float>(2 * kPi)),
        s2(static_cast<float>(2.0 / (M.nu + 2))), nu(static_cast<float>(M.nu)),
        h(static_cast<float>(1.0 / (2 * (M.nu + 2))));
    alignas(64) float u0[kBlock * L], u1[kBlock * L];
    uniforms(seed, k0, cnt, u0, u1);
    for (int64_t j = cnt; j < nv * L; ++j) u0[j] = u1[j] = 0.f;
    Vec c[kBlock], x[kBlock], em[kBlock];
    for (int64_t v = 0; v < nv; ++v) c[v] = (Vec::loadu(u0 + v * L) * two_pi).cos();
    // 1 - u is exact for a multiple of 2^-24 in [0, 1), so log(1 - u) is log1p(-u) to within
    // log's own rounding
    for (int64_t v = 0; v < nv; ++v)
      x[v] = at::vec::maximum(zero - log_fast(one - Vec::loadu(u1 + v * L)), floor_e) * s2;
    for (int64_t v = 0; v < nv; ++v) em[v] = expm1_pos(x[v]);
    for (int64_t v = 0; v < nv; ++v) {
      zr[v] = (em[v] * nu).sqrt() * c[v];
      m[v] = (x[v] / em[v]) * (em[v] + one) * h;
    }
  }
};

// Calls chunk(k0, cnt) over the kept rows of matrix i in runs of consecutive rows (each run is
// contiguous), and nil(off) for the offset of each nil row.
template <typename ChunkFn, typename NilFn>
void for_each_chunk(int64_t i, int64_t V, int64_t d, const float* keep, ChunkFn chunk, NilFn nil) {
  const int64_t plane = V * d, step = kBlock * Vec::size();
  int64_t r = 0;
  while (r < V) {
    const int64_t off = i * plane + r * d;
    if (keep[r] == 0.f) {
      nil(off);
      ++r;
      continue;
    }
    int64_t r1 = r + 1;
    while (r1 < V && keep[r1] != 0.f) ++r1;
    const int64_t end = i * plane + r1 * d;
    for (int64_t k0 = off; k0 < end; k0 += step) chunk(k0, std::min<int64_t>(step, end - k0));
    r = r1;
  }
}

uint64_t draw_seed() {  // one 64-bit draw from torch's default CPU generator
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return at::check_generator<at::CPUGeneratorImpl>(gen)->random64();
}

class PosteriorStep : public torch::autograd::Function<PosteriorStep> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx,
                                                torch::Tensor mu, torch::Tensor rho,
                                                torch::Tensor log_nu, torch::Tensor keep,
                                                int64_t seed, double n_keep, double prior_dof,
                                                double weight) {
    const int64_t n = mu.size(0), V = mu.size(1), d = mu.size(2);
    auto mats = matrices(log_nu, prior_dof);
    auto theta = torch::empty_like(mu);
    auto noise = torch::empty({2, n, V, d}, mu.options());  // zr and m, for the backward
    const float* pmu = mu.data_ptr<float>();
    const float* prho = rho.data_ptr<float>();
    const float* pkeep = keep.data_ptr<float>();
    float* pth = theta.data_ptr<float>();
    float* pzr = noise.data_ptr<float>();
    float* pm = pzr + n * V * d;
    const uint64_t useed = static_cast<uint64_t>(seed);
    Chunk ch;
    for (int64_t i = 0; i < n; ++i) {
      Matrix& M = mats[i];
      for_each_chunk(i, V, d, pkeep, [&](int64_t k0, int64_t cnt) {
        ch.sigma_terms(prho, k0, cnt, M.a);
        ch.noise_terms(useed, k0, M);
        Vec s1(0.f), s2(0.f), s3(0.f);  // float within a chunk, double across chunks
        for (int64_t v = 0; v < ch.nv; ++v) {
          const int64_t k = k0 + v * Chunk::L, cv = ch.count(v);
          const Vec vm = Vec::loadu(pmu + k, cv);
          at::vec::fmadd(ch.sig[v], ch.zr[v], vm).store(pth + k, cv);
          ch.zr[v].store(pzr + k, cv);
          ch.m[v].store(pm + k, cv);
          s1 = s1 + head(ch.pw[v], cv);
          s2 = s2 + head(ch.sig[v] * ch.sig[v] + vm * vm, cv);
          s3 = s3 + head(ch.pw[v] * ch.ls[v], cv);
        }
        M.S1 += hsum(s1);
        M.S2 += hsum(s2);
        M.S3 += hsum(s3);
      }, [&](int64_t off) {  // nil row: 0 (zr and m are not read for it)
        std::fill(pth + off, pth + off + d, 0.f);
      });
    }
    double D = 0;
    for (auto& M : mats) {
      M.inner = M.B * M.S1 - M.P * (n_keep + M.S2 / M.p);
      D += M.inv * M.inner;
    }
    ctx->save_for_backward({mu, rho, keep, noise});
    // [n_keep, tied, weight, then 13 per matrix]
    std::vector<double> packed = {n_keep, prior_dof < 0 ? 1.0 : 0.0, weight};
    packed.reserve(3 + 13 * n);
    last_nus.clear();
    for (const auto& M : mats) {
      for (double v : {M.nu, M.dnu, M.a, M.c, M.e, M.inv, M.B, M.P, M.p, M.S1, M.S2, M.S3, M.inner})
        packed.push_back(v);
      last_nus.push_back(M.nu);
    }
    ctx->saved_data["scalars"] = c10::List<double>(packed);
    ctx->set_materialize_grads(false);
    last_divergence = D;
    return {theta, at::scalar_tensor(weight * D, mu.options())};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto vars = ctx->get_saved_variables();
    const torch::Tensor &mu = vars[0], &rho = vars[1], &keep = vars[2], &noise = vars[3];
    const int64_t n = mu.size(0), V = mu.size(1), d = mu.size(2);
    const auto packed = ctx->saved_data["scalars"].toDoubleList().vec();
    const double N = packed[0], weight = packed[2];
    const bool tied = packed[1] != 0.0;
    torch::Tensor G = grads[0].defined() ? grads[0].contiguous() : torch::Tensor();
    double gD = 0.0;
    if (grads[1].defined())
      gD = weight * (grads[1].scalar_type() == torch::kFloat ? *grads[1].data_ptr<float>()
                                                             : grads[1].item<double>());
    const bool has_G = G.defined();
    const bool need_mu = ctx->needs_input_grad(0), need_rho = ctx->needs_input_grad(1),
               need_nu = ctx->needs_input_grad(2);
    auto g_mu = need_mu ? torch::empty_like(mu) : torch::Tensor();
    auto g_rho = need_rho ? torch::empty_like(mu) : torch::Tensor();
    std::vector<double> g_nu(n, 0.0);
    const float* pmu = mu.data_ptr<float>();
    const float* prho = rho.data_ptr<float>();
    const float* pkeep = keep.data_ptr<float>();
    const float* pg = has_G ? G.data_ptr<float>() : nullptr;
    const float* pzr = noise.data_ptr<float>();
    const float* pm = pzr + n * V * d;
    float* pgmu = need_mu ? g_mu.data_ptr<float>() : nullptr;
    float* pgrho = need_rho ? g_rho.data_ptr<float>() : nullptr;
    const bool elementwise = pgmu || pgrho || (need_nu && has_G);
    Chunk ch;
    for (int64_t i = 0; i < n; ++i) {
      const double* s = packed.data() + 3 + 13 * i;
      const double nu = s[0], dnu = s[1], a = s[2], c = s[3], e = s[4], inv = s[5], B = s[6],
                   P = s[7], p = s[8], S1 = s[9], S2 = s[10], S3 = s[11], inner = s[12];
      const Vec kq(static_cast<float>(gD * -inv * P * 2 / p));  // gD dD/dmu = kq mu
      const Vec ks(static_cast<float>(gD * inv * B * a));       // gD dD/dsigma = ks sigma^(a-1) + kq sigma
      double T1 = 0, T2 = 0;  // float within a chunk, double across chunks
      if (elementwise) {
        for_each_chunk(i, V, d, pkeep, [&](int64_t k0, int64_t cnt) {
          ch.sigma_terms(prho, k0, cnt, a);
          Vec t1(0.f), t2(0.f);
          for (int64_t v = 0; v < ch.nv; ++v) {
            const int64_t k = k0 + v * Chunk::L, cv = ch.count(v);
            const Vec g = has_G ? Vec::loadu(pg + k, cv) : Vec(0.f);  // 0 past cv
            const Vec sigma = ch.sig[v];
            const Vec q = g * Vec::loadu(pzr + k, cv);  // g dTheta/dsigma
            if (pgmu) at::vec::fmadd(kq, Vec::loadu(pmu + k, cv), g).store(pgmu + k, cv);
            if (pgrho) {
              const Vec gs = q + ks * ch.pw[v] / sigma + kq * sigma;
              (gs * ch.sgm[v]).store(pgrho + k, cv);
            }
            const Vec qs = q * sigma;
            t1 = t1 + qs;
            t2 = t2 + qs * Vec::loadu(pm + k, cv);
          }
          T1 += hsum(t1);
          T2 += hsum(t2);
        }, [&](int64_t off) {  // nil row: no gradient
          if (pgmu) std::fill(pgmu + off, pgmu + off + d, 0.f);
          if (pgrho) std::fill(pgrho + off, pgrho + off + d, 0.f);
        });
      }
      if (need_nu) {
        double g = T1 / (2 * nu) - T2;  // draw: dTheta/dnu = sigma zr (1/(2 nu) - m)
        if (gD != 0.0) {                // divergence: d/dnu of inv * inner
          const double da = -a * a / 2;
          const double dc = 0.5 * (digamma((nu + 1) / 2) - digamma(nu / 2)) - 1 / (2 * nu);
          const double de = e * (-da * c - a * dc);
          const double dB = -e / (nu * nu) + (1 + 1 / nu) * de;
          double d_inner = dB * S1 + B * S3 * da;
          if (tied) d_inner += -de * (N + S2 / nu) + e * S2 / (nu * nu);
          g += gD * (-0.5 * inner + inv * d_inner);
        }
        g_nu[i] = g * dnu;
      }
    }
    torch::Tensor g_log_nu;
    if (need_nu) {
      g_log_nu = torch::empty({n}, mu.options());
      std::copy(g_nu.begin(), g_nu.end(), g_log_nu.data_ptr<float>());
    }
    return {g_mu, g_rho, g_log_nu, torch::Tensor(), torch::Tensor(), torch::Tensor(),
            torch::Tensor(), torch::Tensor()};
  }
};

void check_inputs(const torch::Tensor& mu, const torch::Tensor& rho, const torch::Tensor& log_nu,
                  const torch::Tensor& keep) {
  for (const auto* t : {&mu, &rho, &log_nu, &keep}) {
    TORCH_CHECK(t->device().is_cpu() && t->scalar_type() == torch::kFloat && t->is_contiguous(),
                "posterior_step: CPU float32 contiguous tensors only");
  }
  TORCH_CHECK(mu.dim() == 3 && rho.sizes() == mu.sizes() && log_nu.dim() == 1 &&
                  log_nu.size(0) == mu.size(0) && keep.numel() == mu.size(1),
              "posterior_step: shapes mu, rho (n, V, d), log_nu (n,), keep (V, 1)");
}

// seed < 0: draw one from torch's default generator.
pybind11::tuple posterior_step(torch::Tensor mu, torch::Tensor rho, torch::Tensor log_nu,
                               torch::Tensor keep, double n_keep, double prior_dof, double weight,
                               int64_t seed) {
  check_inputs(mu, rho, log_nu, keep);
  if (seed < 0) seed = static_cast<int64_t>(draw_seed() >> 1);
  auto out = PosteriorStep::apply(mu, rho, log_nu, keep, seed, n_keep, prior_dof, weight);
  pybind11::list nus;
  for (double v : last_nus) nus.append(v);
  return pybind11::make_tuple(out[0], out[1], last_divergence, nus);
}

// The uniforms the kernel draws for `seed`: (2, n, V, d) (tests feed them to the Python node).
torch::Tensor posterior_uniforms(int64_t n, int64_t V, int64_t d, int64_t seed) {
  auto u = torch::empty({2, n, V, d}, torch::kFloat);
  uniforms(static_cast<uint64_t>(seed), 0, n * V * d, u.data_ptr<float>(),
           u.data_ptr<float>() + n * V * d);
  return u;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("posterior_step", &posterior_step,
        "t-MEM-NN polar escort draw + weight * (D 56) divergence, forward and backward in one node "
        "(CPU, float32): (Theta, weight * D, D, [nu_i]); seed < 0 draws one from torch's generator");
  m.def("posterior_uniforms", &posterior_uniforms,
        "the (2, n, V, d) uniforms posterior_step draws for a seed");
}
