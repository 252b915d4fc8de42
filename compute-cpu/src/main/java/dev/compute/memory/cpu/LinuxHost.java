package dev.compute.memory.cpu;

import dev.compute.memory.DeviceMemoryInfo;
import com.sun.management.OperatingSystemMXBean;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.OptionalLong;

/** What {@code /proc} (and the JDK's container view) says about the machine: memory, the processor, this process's capabilities. */
final class LinuxHost {

    private static final Path MEMINFO = Path.of("/proc/meminfo");
    private static final Path CPUINFO = Path.of("/proc/cpuinfo");
    private static final Path STATUS = Path.of("/proc/self/status");
    /** The capability that lets a process lock memory beyond {@code RLIMIT_MEMLOCK}. */
    private static final int CAP_IPC_LOCK = 14;

    private LinuxHost() {}

    /**
     * MemAvailable (what can be allocated without swapping) and MemTotal, capped by the container's memory
     * limit where there is one (the JDK reads the cgroup, v1 or v2); -1 for what cannot be read.
     */
    static DeviceMemoryInfo memory() {
        List<String> lines = lines(MEMINFO);
        OperatingSystemMXBean os = ManagementFactory.getPlatformMXBean(OperatingSystemMXBean.class);
        return withinLimit(kibibytes(lines, "MemTotal:").orElse(-1), kibibytes(lines, "MemAvailable:").orElse(-1),
                os.getTotalMemorySize(), os.getFreeMemorySize());
    }

    /**
     * The machine's figures, or the container's where its limit is lower. The JDK's free figure in a
     * container is the limit less usage, page cache included, so it only ever lowers MemAvailable.
     */
    static DeviceMemoryInfo withinLimit(long memTotal, long memAvailable, long limitTotal, long limitFree) {
        if (limitTotal <= 0 || (memTotal > 0 && limitTotal >= memTotal)) {
            return new DeviceMemoryInfo(memAvailable, memTotal);
        }
        long free = memAvailable < 0 ? limitFree : Math.min(memAvailable, Math.max(limitFree, 0));
        return new DeviceMemoryInfo(free, limitTotal);
    }

    /**
     * RAM and swap together (the container's limits where it has them, as the JDK reads the cgroup): what this process
     * can have backed at most; -1 when unknown.
     */
    static long memoryAndSwapBytes() {
        OperatingSystemMXBean os = ManagementFactory.getPlatformMXBean(OperatingSystemMXBean.class);
        long memory = memory().totalBytes();
        long swap = os.getTotalSwapSpaceSize();
        return memory <= 0 ? -1 : memory + Math.max(0, swap);
    }

    /** The processor's model name, or the architecture where {@code /proc/cpuinfo} does not name it. */
    static String processorName() {
        for (String line : lines(CPUINFO)) {
            if (line.startsWith("model name")) {
                int colon = line.indexOf(':');
                if (colon >= 0 && !line.substring(colon + 1).isBlank()) {
                    return line.substring(colon + 1).trim();
                }
            }
        }
        return System.getProperty("os.arch");
    }

    /** Bytes of this process's memory locked now ({@code VmLck}), -1 if unknown. */
    static long lockedBytes() {
        return kibibytes(lines(STATUS), "VmLck:").orElse(-1);
    }

    /** Whether this process may lock memory without limit (root, or a container given {@code IPC_LOCK}). */
    static boolean mayLockWithoutLimit() {
        for (String line : lines(STATUS)) {
            if (line.startsWith("CapEff:")) {
                long capabilities = Long.parseUnsignedLong(line.substring("CapEff:".length()).trim(), 16);
                return (capabilities & (1L << CAP_IPC_LOCK)) != 0;
            }
        }
        return false;
    }

    private static OptionalLong kibibytes(List<String> lines, String key) {
        for (String line : lines) {
            if (line.startsWith(key)) {
                String[] parts = line.substring(key.length()).trim().split("\\s+");
                return OptionalLong.of(Long.parseLong(parts[0]) * 1024);
            }
        }
        return OptionalLong.empty();
    }

    private static List<String> lines(Path file) {
        try {
            return Files.readAllLines(file);
        } catch (IOException e) {
            return List.of();
        }
    }
}
