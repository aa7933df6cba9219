//! What the numbers were measured on, recorded beside them.

use serde::Serialize;

/// The machine and build a run came from.
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    pub cpu: String,
    pub cores: usize,
    pub memory_gib: u64,
    pub l3: String,
    pub thp: String,
    pub kernel: String,
    pub git_revision: String,
    pub build_profile: String,
    pub date_unix: u64,
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default().trim().to_string()
}

impl Machine {
    /// Read it from /proc, /sys and git.
    pub fn describe() -> Machine {
        let cpuinfo = read("/proc/cpuinfo");
        let cpu = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split(':').nth(1))
            .unwrap_or("unknown")
            .trim()
            .to_string();
        let memory_gib = read("/proc/meminfo")
            .lines()
            .next()
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<u64>().ok())
            .map(|kb| (kb + (1 << 19)) >> 20)
            .unwrap_or(0);
        let l3 = read("/sys/devices/system/cpu/cpu0/cache/index3/size");
        let git_revision = std::process::Command::new("git")
            .args(["describe", "--always", "--dirty", "--abbrev=7"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_else(|| "unknown".into());
        Machine {
            cpu,
            cores: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            memory_gib,
            l3: if l3.is_empty() { "unknown".into() } else { l3 },
            thp: read("/sys/kernel/mm/transparent_hugepage/enabled"),
            kernel: read("/proc/sys/kernel/osrelease"),
            git_revision,
            build_profile: if cfg!(debug_assertions) { "debug".into() } else { "release".into() },
            date_unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
        }
    }

    /// The L3 size in bytes, if the kernel says ("32768K").
    pub fn l3_bytes(&self) -> Option<usize> {
        let s = self.l3.trim();
        let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
        let n: usize = num.parse().ok()?;
        Some(match unit.trim().chars().next() {
            Some('K') | Some('k') => n << 10,
            Some('M') | Some('m') => n << 20,
            None => n,
            _ => return None,
        })
    }

    /// One line for the report.
    pub fn line(&self) -> String {
        format!(
            "{}, {} cores, {} GiB, L3 {}, THP {}, kernel {}, git {}, {} build",
            self.cpu,
            self.cores,
            self.memory_gib,
            self.l3,
            self.thp,
            self.kernel,
            self.git_revision,
            self.build_profile
        )
    }
}
