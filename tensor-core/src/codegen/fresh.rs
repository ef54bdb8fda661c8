//! Fresh numbers for the passes that add lines to a lowered GPU kernel (`group`, `stage`):
//! temps, accumulators, ranges and shared arrays the kernel does not use yet.

use super::program::{GpuKernel, Line, Value};
use crate::uop::UOp;

/// Numbers not used by the kernel yet, for new temps, accumulators, ranges and shared arrays.
pub struct Fresh {
    /// The next free temp number.
    pub temp: usize,
    /// The next free accumulator number.
    pub acc: usize,
    /// The next free range id.
    pub range: usize,
    /// The next free shared array number.
    pub local: usize,
}

impl Fresh {
    /// The numbers past every one `kernel` uses.
    pub fn after(kernel: &GpuKernel) -> Fresh {
        let mut fresh = Fresh {
            temp: 0,
            acc: 0,
            range: 0,
            local: 0,
        };
        for s in &kernel.specials {
            fresh.see_range(&s.range);
        }
        for lane in [
            kernel.group.as_ref().map(|g| &g.lane),
            kernel.local.as_ref().map(|t| &t.lane),
        ]
        .into_iter()
        .flatten()
        {
            fresh.see_range(lane);
        }
        for line in &kernel.body.lines {
            fresh.see(line);
        }
        fresh
    }

    fn see(&mut self, line: &Line) {
        match line {
            Line::Loop(r) => self.see_range(r),
            Line::StridedLoop { range, lane, .. } => {
                self.see_range(range);
                self.see_range(lane);
            }
            Line::DefineAcc { acc, .. } => self.acc = self.acc.max(acc + 1),
            Line::Assign { temp, operands, .. } => {
                self.temp = self.temp.max(temp + 1);
                operands.iter().for_each(|v| self.see_value(v));
            }
            Line::VectorLoad { temps, .. } => {
                let last = temps.iter().max().map_or(0, |t| t + 1);
                self.temp = self.temp.max(last);
            }
            Line::LocalVectorLoad { temps, local, .. } => {
                let last = temps.iter().max().map_or(0, |t| t + 1);
                self.temp = self.temp.max(last);
                self.local = self.local.max(local + 1);
            }
            Line::LocalLoad { temp, local, .. } => {
                self.temp = self.temp.max(temp + 1);
                self.local = self.local.max(local + 1);
            }
            Line::DefineLocal { local, .. } | Line::LocalStore { local, .. } => {
                self.local = self.local.max(local + 1)
            }
            _ => {}
        }
    }

    fn see_value(&mut self, v: &Value) {
        if let Value::Range(r) = v {
            self.see_range(r);
        }
    }

    fn see_range(&mut self, r: &UOp) {
        self.range = self.range.max(r.range_id() + 1);
    }

    /// A range id no range of the kernel has.
    pub fn range(&mut self) -> usize {
        self.range += 1;
        self.range - 1
    }

    /// A temp number no line of the kernel writes.
    pub fn temp(&mut self) -> usize {
        self.temp += 1;
        self.temp - 1
    }

    /// A shared array number no line of the kernel uses.
    pub fn local(&mut self) -> usize {
        self.local += 1;
        self.local - 1
    }
}
