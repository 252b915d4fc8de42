package dev.compute.benchmarks.replay;

import dev.compute.memory.spi.BackendSelection;
import dev.compute.memory.spi.BackendSettings;
import dev.compute.memory.spi.ComputeBackend;
import dev.compute.memory.testing.AddressSpaceBackend;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Path;
import java.time.Duration;
import java.time.format.DateTimeParseException;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.jspecify.annotations.Nullable;

/**
 * {@code replay [--backend address-space|cpu|cuda|opencl] [--capacity BYTES] [settings] [--location L] [--strict]
 * [--pytorch] [--warmups N] [--runs N] FILE...}: replays each trace (each location of it in turn, where it names
 * several) at the pool settings given, and prints a {@code # settings} line, then per trace one {@code replay ...} line
 * and a table; with {@code --pytorch}, also one {@code pytorch ...} line: the same trace through a model of PyTorch's
 * allocator with expandable segments ({@link PyTorchExpandableSegments}), its overhead and map calls beside ours, and
 * the calls it forces: those any allocator makes that reserves no more than PyTorch at its peak on every prefix.
 * Settings, as the manager's properties name them: {@code --max-pool-size}, {@code --max-pinned-size},
 * {@code --release-threshold}, {@code --trim-interval}, {@code --expandable} / {@code --no-expandable},
 * {@code --compact-on-oom} / {@code --no-compact-on-oom}. The default
 * backend hands out address space without memory behind it (an 80 GiB device, the H100 the traces were recorded on,
 * with 2 MiB pages), so any machine replays a multi-gigabyte trace; a named backend replays on the real device,
 * where the capacity (default: the device's total memory) limits the pool's cap alone.
 *
 * <p>Exit status: 0 when every trace replayed; 1 when one could not be read or an event failed (out of memory at
 * these settings, or under {@code --strict} a free of an id that is not live), with a message naming the event's
 * file, line, id and bytes; 2 for a wrong command line.
 */
public final class ReplayCommand {

    static final String ADDRESS_SPACE = "address-space";
    static final long DEFAULT_CAPACITY = 80L << 30;
    /** The backends {@code --backend} names: ours, and those {@link BackendSelection} chooses among ({@code auto}: the best). */
    private static final List<String> BACKENDS = List.of(ADDRESS_SPACE, "auto", "cpu", "cuda", "opencl");
    static final int MIN_WARMUPS = 20;
    static final long WARMUP_EVENTS = 2_000_000;
    private static final Duration LONGEST_DURATION = Duration.ofNanos(Long.MAX_VALUE);
    static final String USAGE = "usage: replay [--backend " + ADDRESS_SPACE + "|cpu|cuda|opencl] [--capacity BYTES]"
            + " [--max-pool-size BYTES] [--max-pinned-size BYTES] [--release-threshold BYTES] [--trim-interval DURATION]"
            + " [--expandable|--no-expandable] [--compact-on-oom|--no-compact-on-oom] [--location DEVICE|HOST|PINNED|UNIFIED] [--strict] [--pytorch] [--warmups N] [--runs N]"
            + " FILE...\n"
            + "  sizes in bytes or with a binary suffix (512m, 6g; GB and MiB spellings too); durations as 30s, 5m, 1h, 0 (no trims)";

    private ReplayCommand() {}

    public static int run(String[] args) {
        return run(args, System.out, System.err);
    }

    static int run(String[] args, PrintStream out, PrintStream err) {
        String backendName = ADDRESS_SPACE;
        Long capacity = null;
        Long maxPoolSize = null;
        Long maxPinnedSize = null;
        Long releaseThreshold = null;
        Duration trimInterval = ReplaySettings.defaults().trimInterval();
        boolean expandable = true;
        boolean compactOnOutOfMemory = true;
        String location = null;
        boolean strict = false;
        boolean pytorch = false;
        Integer warmups = null;
        int runs = 10;
        List<Path> files = new ArrayList<>();
        try {
            for (int i = 0; i < args.length; i++) {
                switch (args[i]) {
                    case "--backend" -> backendName = value(args, ++i).toLowerCase(Locale.ROOT);
                    case "--capacity" -> capacity = parseBytes(value(args, ++i));
                    case "--max-pool-size" -> maxPoolSize = parseBytes(value(args, ++i));
                    case "--max-pinned-size" -> maxPinnedSize = parseBytes(value(args, ++i));
                    case "--release-threshold" -> releaseThreshold = parseBytesOrZero(value(args, ++i));
                    case "--trim-interval" -> trimInterval = parseDuration(value(args, ++i));
                    case "--expandable" -> expandable = true;
                    case "--no-expandable" -> expandable = false;
                    case "--compact-on-oom" -> compactOnOutOfMemory = true;
                    case "--no-compact-on-oom" -> compactOnOutOfMemory = false;
                    case "--location" -> location = value(args, ++i).toUpperCase(Locale.ROOT);
                    case "--strict" -> strict = true;
                    case "--pytorch" -> pytorch = true;
                    case "--warmups" -> warmups = count(args[i], value(args, ++i));
                    case "--runs" -> runs = count(args[i], value(args, ++i));
                    case "-h", "--help" -> {
                        out.println(USAGE);
                        return 0;
                    }
                    default -> {
                        if (args[i].startsWith("-")) {
                            throw new IllegalArgumentException("unknown option " + args[i]);
                        }
                        files.add(Path.of(args[i]));
                    }
                }
            }
            if (!BACKENDS.contains(backendName)) {
                throw new IllegalArgumentException("unknown backend " + backendName + ": one of " + String.join(", ", BACKENDS));
            }
            if (files.isEmpty()) {
                throw new IllegalArgumentException("no trace file given");
            }
            if (releaseThreshold != null && maxPoolSize != null && releaseThreshold > maxPoolSize) {
                throw new IllegalArgumentException("--release-threshold (" + releaseThreshold + ") is more than --max-pool-size ("
                        + maxPoolSize + "): a pool cannot keep more cache than it may reserve");
            }
        } catch (IllegalArgumentException e) {
            err.println("replay: " + e.getMessage());
            err.println(USAGE);
            return 2;
        }
        ReplaySettings settings = new ReplaySettings(maxPoolSize, maxPinnedSize, releaseThreshold, trimInterval, expandable, compactOnOutOfMemory);
        out.println(settings.describe());
        try {
            for (Path file : files) {
                Trace trace = Trace.read(file, strict);
                for (Trace part : parts(trace, location)) {
                    ReplayResult result = replay(backendName, capacity, settings, part, warmups != null ? warmups : defaultWarmups(part), runs, out);
                    out.println(result.line());
                    if (pytorch) {
                        out.println(pytorchLine(part));
                    }
                    out.print(result.table());
                }
            }
            return 0;
        } catch (IOException | RuntimeException e) {
            // the failures this command makes name the event or line; anything else is shown whole
            err.println("replay failed: " + (e instanceof ReplayFailedException || e instanceof IllegalArgumentException
                    || e instanceof Trace.Unreadable ? e.getMessage() : e));
            return 1;
        }
    }

    /**
     * Untimed replays before the timed ones, where {@code --warmups} is not given: at least twenty, and enough for
     * {@value #WARMUP_EVENTS} events, so that the JIT has compiled the pool before timing starts whatever the trace's
     * length (twenty replays of a trace of ten thousand events leave it half compiled, and the timed runs slow).
     */
    static int defaultWarmups(Trace trace) {
        return (int) Math.max(MIN_WARMUPS, Math.ceilDiv(WARMUP_EVENTS, Math.max(1, trace.events())));
    }

    /** The line of {@code --pytorch}: PyTorch's policy on the same trace, with the figures named as in the replay line. */
    static String pytorchLine(Trace trace) {
        PyTorchExpandableSegments.Figures figures = PyTorchExpandableSegments.replay(trace);
        long minCapacity = PyTorchExpandableSegments.smallestCapacity(trace);
        String location = String.join("+", trace.locations());
        return String.format(Locale.ROOT, "pytorch trace=%s%s policy=expandable_segments reserved_peak=%d overhead=%.3f min_capacity=%d"
                        + " capacity_ratio=%.3f backend_calls=%d maps=%d unmaps=0 forced_calls=%d",
                trace.name(), location.isEmpty() ? "" : " location=" + location, figures.reservedPeak(),
                (double) figures.reservedPeak() / trace.livePeak(), minCapacity, (double) minCapacity / trace.livePeak(), figures.mapCalls(), figures.mapCalls(),
                figures.forcedCalls());
    }

    /** The trace, or its events at {@code location}, or, where it names several locations, each location's in turn. */
    private static List<Trace> parts(Trace trace, @Nullable String location) {
        List<String> named = trace.locations();
        if (location != null) {
            if (!named.contains(location)) {
                throw new IllegalArgumentException(trace.name() + " has no events at " + location
                        + (named.isEmpty() ? ": it names no locations" : "; it has " + String.join(", ", named)));
            }
            return List.of(trace.only(location));
        }
        return named.size() > 1 ? named.stream().map(trace::only).toList() : List.of(trace);
    }

    private static ReplayResult replay(String backendName, @Nullable Long capacity, ReplaySettings settings, Trace trace,
                                       int warmups, int runs, PrintStream out) {
        if (backendName.equals(ADDRESS_SPACE)) {
            long bytes = capacity != null ? capacity : DEFAULT_CAPACITY;
            return new TraceReplayer(AddressSpaceBackend::new, true, settings).measure(trace, bytes, warmups, runs);
        }
        BackendSettings backendSettings = BackendSettings.ofDevice(0);
        ClassLoader loader = ReplayCommand.class.getClassLoader();
        try (ComputeBackend device = BackendSelection.choose(backendName, backendSettings, BackendSelection.providers(loader))
                .provider().create(backendSettings)) {
            long total = device.memoryInfo().totalBytes() > 0 ? device.memoryInfo().totalBytes() : device.info().deviceTotalBytes();
            long bytes = capacity != null ? capacity : total;
            if (bytes <= 0) {
                throw new IllegalArgumentException(backendName + " does not say how much memory it has; give --capacity");
            }
            out.println("# replaying on " + device.info() + " with a capacity of " + bytes + " bytes");
            return new TraceReplayer(c -> device, false, settings).measure(trace, bytes, warmups, runs);
        }
    }

    private static String value(String[] args, int i) {
        if (i >= args.length) {
            throw new IllegalArgumentException(args[i - 1] + " needs a value");
        }
        return args[i];
    }

    private static int count(String option, String text) {
        try {
            int count = Integer.parseInt(text);
            if (count >= 0) {
                return count;
            }
        } catch (NumberFormatException e) {
            // reported below
        }
        throw new IllegalArgumentException(option + " needs a count of 0 or more, not " + text);
    }

    /**
     * Bytes, or with a binary suffix: {@code 80g}, {@code 512m}, {@code 64k}; also spelt as Spring spells sizes in
     * {@code application.yml} ({@code 6GB}, {@code 512MB}, which Spring also takes as binary) and {@code 6GiB}.
     */
    static long parseBytes(String text) {
        long bytes = parseBytesOrZero(text);
        if (bytes == 0) {
            throw new IllegalArgumentException("not a positive size: " + text);
        }
        return bytes;
    }

    private static long parseBytesOrZero(String text) {
        String t = text.strip().toLowerCase(Locale.ROOT);
        if (t.endsWith("ib")) {
            t = t.substring(0, t.length() - 2);
        } else if (t.endsWith("b")) {
            t = t.substring(0, t.length() - 1);
        }
        int shift = switch (t.isEmpty() ? ' ' : t.charAt(t.length() - 1)) {
            case 'k' -> 10;
            case 'm' -> 20;
            case 'g' -> 30;
            case 't' -> 40;
            default -> 0;
        };
        String digits = shift == 0 ? t : t.substring(0, t.length() - 1);
        try {
            long value = Long.parseLong(digits);
            if (value >= 0 && value <= (Long.MAX_VALUE >> shift)) {
                return value << shift;
            }
        } catch (NumberFormatException e) {
            // reported below
        }
        throw new IllegalArgumentException("not a size: " + text);
    }

    /** {@code 0}, {@code 30s}, {@code 5m}, {@code 1h}, {@code 250ms}, or ISO-8601 ({@code PT5M}). */
    static Duration parseDuration(String text) {
        String t = text.strip().toLowerCase(Locale.ROOT);
        try {
            if (t.startsWith("pt")) {
                return nonNegative(text, Duration.parse(t));
            }
            if (t.equals("0")) {
                return Duration.ZERO;
            }
            if (t.endsWith("ms")) {
                return nonNegative(text, Duration.ofMillis(Long.parseLong(t.substring(0, t.length() - 2))));
            }
            long amount = Long.parseLong(t.substring(0, t.length() - 1));
            return nonNegative(text, switch (t.charAt(t.length() - 1)) {
                case 's' -> Duration.ofSeconds(amount);
                case 'm' -> Duration.ofMinutes(amount);
                case 'h' -> Duration.ofHours(amount);
                case 'd' -> Duration.ofDays(amount);
                default -> throw new IllegalArgumentException("not a duration: " + text);
            });
        } catch (NumberFormatException | DateTimeParseException | StringIndexOutOfBoundsException | ArithmeticException e) {
            throw new IllegalArgumentException("not a duration: " + text + " (such as 30s, 5m, 1h or 0)");
        }
    }

    /** A trim interval is compared with the trace's nanoseconds: at most a long of them (about 292 years). */
    private static Duration nonNegative(String text, Duration duration) {
        if (duration.isNegative()) {
            throw new IllegalArgumentException("not a duration of 0 or more: " + text);
        }
        if (duration.compareTo(LONGEST_DURATION) > 0) {
            throw new IllegalArgumentException("not a duration of at most " + LONGEST_DURATION.toDays() + " days (a trace's time is in nanoseconds): " + text);
        }
        return duration;
    }
}
