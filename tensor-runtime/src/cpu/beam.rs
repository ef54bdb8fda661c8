//! `BEAM=n`: OptOps chosen by timing real launches instead of by the hand-coded heuristic.
//!
//! For each kernel, a beam of the `n` fastest opt lists found so far starts from the
//! heuristic's list and from no opts at all; each round adds every move of
//! `codegen::search::moves` to every member, compiles the new candidates together (one
//! compiler run per core), launches each on buffers of the kernel's sizes filled with
//! ordinary values (inputs in `[0.5, 1.5)`), and keeps the `n` fastest. The search stops when
//! a round improves the best time by less than 2%, or after [`MAX_ROUNDS`]. A candidate whose
//! outputs differ from the heuristic's (beyond the float tolerance of reassociation) is
//! discarded, so a search can only change speed.
//!
//! The winner is cached on disk (`<cache dir>/beam/`, the kernel cache's entry format and
//! checks), keyed by the kernel's unoptimized source, the cores, the beam width, the compiler
//! and its flags, and the CPU model: the next process that builds the same kernel takes it
//! without searching. While searching, one progress line per round goes to stderr.

use super::CpuDevice;
use crate::device::{CheckedProgram, Device};
use crate::error::{Result, RuntimeError};
use crate::stable_hash::StableHasher;
use std::io::IsTerminal;
use std::time::{Duration, Instant};
use tensor_core::UOp;
use tensor_core::codegen::opt::{Opt, OptimizedKernel};
use tensor_core::codegen::search::moves;
use tensor_core::codegen::{KernelArg, heuristic, lower_kernel_with_opts_named};
use tensor_core::render::Kernel;
use tensor_core::render::c::render_kernel;
use tensor_core::uop::dtype::{decode_scalars, encode_scalars};
use tensor_core::uop::{AxisType, Scalar};

/// The most rounds of one search.
pub const MAX_ROUNDS: usize = 6;

/// The most new candidates timed per round (the first ones, in move order).
pub const MAX_CANDIDATES_PER_ROUND: usize = 48;

/// The beam width `BEAM` asks for: 0 (no search) when unset.
pub fn beam_width_from_env() -> Result<usize> {
    beam_width_setting(crate::settings::var("BEAM"))
}

fn beam_width_setting(value: Option<String>) -> Result<usize> {
    let Some(value) = value else {
        return Ok(0);
    };
    value
        .trim()
        .parse::<usize>()
        .map_err(|_| RuntimeError::InvalidSetting {
            variable: "BEAM",
            value,
            expected: "a beam width (0 turns the search off)",
        })
}

/// The opts to lower `ast` with: the cached winner of an earlier search, else the winner of
/// a search now (see the module docs). Falls back to the heuristic's opts, with a warning,
/// when the search cannot run.
pub fn best_opts(device: &CpuDevice, ast: &UOp, sizes: &[usize], width: usize) -> Vec<Opt> {
    let threads = device.default_threads();
    let key = search_key(device, ast, sizes, threads, width);
    if let Some(opts) = cached(device, ast, key) {
        crate::stats::record_beam_cache_hit();
        return opts;
    }
    match Search::new(device, ast, sizes, threads, width).and_then(|s| s.run()) {
        Ok(opts) => {
            device
                .beam_cache()
                .store(key, encode_opts(&opts).as_bytes());
            opts
        }
        Err(e) => {
            crate::warn(&format!(
                "BEAM search failed ({e}); using the hand-coded optimizations"
            ));
            heuristic::hand_coded_optimizations(ast, threads, device.vector_lanes())
        }
    }
}

/// One candidate: its opts and, once timed, its best launch time.
#[derive(Clone)]
struct Candidate {
    opts: Vec<Opt>,
    time: Duration,
}

struct Search<'a> {
    device: &'a CpuDevice,
    ast: UOp,
    sizes: Vec<usize>,
    threads: usize,
    width: usize,
    args: Vec<KernelArg>,
    buffers: Vec<super::CpuBuffer>,
    /// The heuristic kernel's outputs, by written slot: what every candidate must compute.
    reference: Vec<Option<Vec<Scalar>>>,
    seen: std::collections::HashSet<Vec<Opt>>,
    name: String,
}

impl<'a> Search<'a> {
    fn new(
        device: &'a CpuDevice,
        ast: &UOp,
        sizes: &[usize],
        threads: usize,
        width: usize,
    ) -> Result<Search<'a>> {
        let plain = lower_kernel_with_opts_named(ast, sizes, &[], "beam");
        let args = plain.args.clone();
        let buffers = args
            .iter()
            .map(|arg| {
                let bytes = arg.size * arg.dtype.size_bytes();
                let buffer = device.allocate(bytes)?;
                if !arg.writes {
                    let values: Vec<Scalar> = (0..arg.size)
                        .map(|i| Scalar::Float(0.5 + (i as f64 * 0.618_034).fract()))
                        .collect();
                    device.copy_in(&buffer, &encode_scalars(&values, arg.dtype))?;
                }
                Ok(buffer)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Search {
            device,
            ast: ast.clone(),
            sizes: sizes.to_vec(),
            threads,
            width: width.max(1),
            args,
            buffers,
            reference: Vec::new(),
            seen: Default::default(),
            name: tensor_core::codegen::kernel_name(ast),
        })
    }

    fn run(mut self) -> Result<Vec<Opt>> {
        let heuristic = heuristic::hand_coded_optimizations(
            &self.ast,
            self.threads,
            self.device.vector_lanes(),
        );
        let first = self.time_all(vec![heuristic.clone()])?;
        let Some(baseline) = first.first().cloned() else {
            return Ok(heuristic);
        };
        let mut beam = first;
        beam.extend(self.time_all(vec![Vec::new()])?);
        sort_by_time(&mut beam);
        for round in 1..=MAX_ROUNDS {
            let best_before = beam[0].time;
            let mut next: Vec<Vec<Opt>> = Vec::new();
            for member in beam.iter().take(self.width) {
                let kernel = OptimizedKernel::new(&self.ast).apply_all(&member.opts);
                for m in moves(&kernel, self.threads) {
                    let opts: Vec<Opt> = member.opts.iter().cloned().chain([m]).collect();
                    if !self.seen.contains(&opts) && next.len() < MAX_CANDIDATES_PER_ROUND {
                        next.push(opts);
                    }
                }
            }
            if next.is_empty() {
                break;
            }
            let tried = next.len();
            beam.extend(self.time_all(next)?);
            sort_by_time(&mut beam);
            beam.truncate(self.width);
            self.progress(round, tried, &baseline, &beam[0]);
            if beam[0].time.as_secs_f64() > best_before.as_secs_f64() * 0.98 {
                break;
            }
        }
        self.finish();
        Ok(beam.swap_remove(0).opts)
    }

    /// Compiles the candidates together and times each; drops those that cannot be lowered
    /// or compute something else than the heuristic's kernel.
    fn time_all(&mut self, candidates: Vec<Vec<Opt>>) -> Result<Vec<Candidate>> {
        let mut kernels: Vec<(Vec<Opt>, Kernel)> = Vec::new();
        for opts in candidates {
            self.seen.insert(opts.clone());
            let name = format!("{}_beam{}", self.name, self.seen.len());
            if let Some(kernel) = self.render(&opts, &name) {
                kernels.push((opts, kernel));
            }
        }
        let rendered: Vec<&Kernel> = kernels.iter().map(|(_, k)| k).collect();
        let programs = self.device.compile_kernels(&rendered)?;
        let mut timed = Vec::new();
        for ((opts, kernel), program) in kernels.into_iter().zip(programs) {
            let best_so_far = timed.iter().map(|c: &Candidate| c.time).min();
            let time = self.time_one(&program, best_so_far)?;
            if self.computes_the_reference(&kernel)? {
                timed.push(Candidate { opts, time });
            }
        }
        Ok(timed)
    }

    /// The candidate's C, or `None` when its opts do not lower or render (a LANE split of a
    /// reduce the renderer cannot vectorize, for one).
    fn render(&self, opts: &[Opt], name: &str) -> Option<Kernel> {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            render_kernel(&lower_kernel_with_opts_named(
                &self.ast,
                &self.sizes,
                opts,
                name,
            ))
        }))
        .ok()
    }

    /// The fastest of a few launches (one when the first is far slower than `best`).
    fn time_one(
        &self,
        program: &CheckedProgram<super::CpuProgram>,
        best: Option<Duration>,
    ) -> Result<Duration> {
        let buffers: Vec<&super::CpuBuffer> = self.buffers.iter().collect();
        self.device.launch(program, &buffers)?;
        let mut fastest = Duration::MAX;
        for _ in 0..3 {
            let started = Instant::now();
            self.device.launch(program, &buffers)?;
            fastest = fastest.min(started.elapsed());
            if best.is_some_and(|b| fastest > b * 3) {
                break;
            }
        }
        Ok(fastest)
    }

    /// True when the last launch left the outputs the heuristic's kernel left (the first
    /// kernel timed sets the reference).
    fn computes_the_reference(&mut self, kernel: &Kernel) -> Result<bool> {
        let outputs = self.outputs()?;
        if self.reference.is_empty() {
            self.reference = outputs;
            return Ok(true);
        }
        let same = outputs
            .iter()
            .zip(&self.reference)
            .all(|(a, b)| match (a, b) {
                (Some(a), Some(b)) => a.iter().zip(b).all(|(x, y)| close(*x, *y)),
                _ => true,
            });
        if !same && crate::settings::debug_level() >= 1 {
            eprintln!(
                "BEAM {}: dropped a candidate whose outputs differ",
                kernel.name
            );
        }
        Ok(same)
    }

    fn outputs(&self) -> Result<Vec<Option<Vec<Scalar>>>> {
        self.args
            .iter()
            .zip(&self.buffers)
            .map(|(arg, buffer)| {
                if !arg.writes {
                    return Ok(None);
                }
                let mut bytes = vec![0u8; self.device.buffer_len(buffer)];
                self.device.copy_out(buffer, &mut bytes)?;
                Ok(Some(decode_scalars(&bytes, arg.dtype)))
            })
            .collect()
    }

    fn progress(&self, round: usize, tried: usize, baseline: &Candidate, best: &Candidate) {
        let line = format!(
            "BEAM {}: round {round}, {tried} candidates, best {:.3?} (heuristic {:.3?}) {}",
            self.name,
            best.time,
            baseline.time,
            describe(&best.opts)
        );
        if std::io::stderr().is_terminal() {
            eprint!("\r\x1b[2K{line}");
        } else {
            eprintln!("{line}");
        }
    }

    fn finish(&self) {
        if std::io::stderr().is_terminal() {
            eprintln!();
        }
        crate::stats::record_beam_search();
    }
}

fn sort_by_time(candidates: &mut [Candidate]) {
    candidates.sort_by_key(|c| c.time);
}

/// Equal within the tolerance of reassociated float sums; other values exactly.
fn close(a: Scalar, b: Scalar) -> bool {
    match (a, b) {
        (Scalar::Float(x), Scalar::Float(y)) => {
            (x - y).abs() <= 1e-5 + 1e-3 * y.abs() || (x.is_nan() && y.is_nan())
        }
        _ => a == b,
    }
}

/// The opts as `t`/`L`/`R`... letters with their range and factor, for progress lines.
fn describe(opts: &[Opt]) -> String {
    let parts: Vec<String> = opts
        .iter()
        .map(
            |Opt::Split {
                 axis,
                 factor,
                 target,
                 ..
             }| { format!("{}{axis}:{factor}", target.letter()) },
        )
        .collect();
    format!("[{}]", parts.join(" "))
}

/// The cache key of a search: the kernel's unoptimized source (which names its buffers'
/// sizes and dtypes and every operation), the cores, the beam width, the compiler with its
/// flags, and the CPU model.
fn search_key(
    device: &CpuDevice,
    ast: &UOp,
    sizes: &[usize],
    threads: usize,
    width: usize,
) -> u128 {
    let plain = render_kernel(&lower_kernel_with_opts_named(ast, sizes, &[], "beam"));
    let mut hasher = StableHasher::new();
    hasher.write_field(b"beam search v1");
    hasher.write_field(plain.source.as_bytes());
    hasher.write_field(&(threads as u64).to_le_bytes());
    hasher.write_field(&(width as u64).to_le_bytes());
    hasher.write_field(device.compiler().command().as_bytes());
    for flag in device.compiler().flags() {
        hasher.write_field(flag.as_bytes());
    }
    hasher.write_field(cpu_model().as_bytes());
    hasher.finish()
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .map(str::to_string)
        })
        .unwrap_or_default()
}

/// The cached opts of `key`, if an entry exists, parses and still applies to `ast`.
fn cached(device: &CpuDevice, ast: &UOp, key: u128) -> Option<Vec<Opt>> {
    let bytes = device.beam_cache().load(key)?;
    let opts = decode_opts(std::str::from_utf8(&bytes).ok()?)?;
    opts.iter()
        .try_fold(OptimizedKernel::new(ast), |k, o| k.apply(o).ok())
        .map(|_| opts)
}

/// One line per opt: `axis factor letter top`.
fn encode_opts(opts: &[Opt]) -> String {
    opts.iter()
        .map(
            |Opt::Split {
                 axis,
                 factor,
                 target,
                 top,
             }| { format!("{axis} {factor} {} {}\n", target.letter(), u8::from(*top)) },
        )
        .collect()
}

fn decode_opts(text: &str) -> Option<Vec<Opt>> {
    text.lines()
        .map(|line| {
            let mut fields = line.split(' ');
            let axis = fields.next()?.parse().ok()?;
            let factor = fields.next()?.parse().ok()?;
            let letter = fields.next()?.chars().next()?;
            let target = [
                AxisType::Thread,
                AxisType::Loop,
                AxisType::Reduce,
                AxisType::Upcast,
                AxisType::Unroll,
                AxisType::ReduceBlock,
                AxisType::Group,
                AxisType::Local,
                AxisType::Lane,
            ]
            .into_iter()
            .find(|t| t.letter() == letter)?;
            let top = fields.next()? == "1";
            Some(Opt::Split {
                axis,
                factor,
                target,
                top,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opts_round_trip_through_their_cache_text() {
        let opts = vec![
            Opt::Split {
                axis: 2,
                factor: 16,
                target: AxisType::Upcast,
                top: false,
            },
            Opt::Split {
                axis: 0,
                factor: 2,
                target: AxisType::Thread,
                top: true,
            },
            Opt::Split {
                axis: 3,
                factor: 4,
                target: AxisType::ReduceBlock,
                top: true,
            },
        ];
        assert_eq!(decode_opts(&encode_opts(&opts)), Some(opts));
        assert_eq!(decode_opts(""), Some(Vec::new()));
        assert_eq!(decode_opts("1 x u 0\n"), None);
    }

    #[test]
    fn the_beam_setting_is_a_width_and_unset_means_no_search() {
        assert_eq!(beam_width_setting(None).unwrap(), 0);
        assert_eq!(beam_width_setting(Some(" 4".into())).unwrap(), 4);
        let err = beam_width_setting(Some("wide".into())).unwrap_err();
        assert!(err.to_string().contains("BEAM"), "{err}");
    }
}
