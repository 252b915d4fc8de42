package dev.compute.benchmarks.replay;

import dev.compute.memory.spi.BackendSelection;
import dev.compute.memory.spi.BackendSettings;
import dev.compute.memory.spi.ComputeBackend;
import dev.compute.memory.testing.AddressSpaceBackend;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * {@code replay [--backend address-space|cpu|cuda|opencl] [--capacity BYTES] [--warmups N] [--runs N] FILE...}:
 * replays each trace and prints one {@code replay ...} line and a table. The default backend hands out
 * address space without memory behind it (an 80 GiB device, the H100 the traces were recorded on, with
 * 2 MiB pages), so any machine replays a multi-gigabyte trace; a named backend replays on the real device,
 * where the capacity (default: the device's total memory) limits the pool's cap alone.
 */
public final class ReplayCommand {

    static final String ADDRESS_SPACE = "address-space";
    static final long DEFAULT_CAPACITY = 80L << 30;

    private ReplayCommand() {}

    public static int run(String[] args) {
        String backendName = ADDRESS_SPACE;
        Long capacity = null;
        // a replay takes milliseconds: twenty untimed ones let the JIT compile the pool before ten are timed
        int warmups = 20;
        int runs = 10;
        List<Path> files = new ArrayList<>();
        try {
            for (int i = 0; i < args.length; i++) {
                switch (args[i]) {
                    case "--backend" -> backendName = value(args, ++i).toLowerCase(Locale.ROOT);
                    case "--capacity" -> capacity = parseBytes(value(args, ++i));
                    case "--warmups" -> warmups = Integer.parseInt(value(args, ++i));
                    case "--runs" -> runs = Integer.parseInt(value(args, ++i));
                    default -> {
                        if (args[i].startsWith("--")) {
                            throw new IllegalArgumentException("unknown option " + args[i]);
                        }
                        files.add(Path.of(args[i]));
                    }
                }
            }
            if (files.isEmpty()) {
                throw new IllegalArgumentException("no trace file given");
            }
        } catch (IllegalArgumentException e) {
            System.err.println("replay: " + e.getMessage());
            System.err.println("usage: replay [--backend " + ADDRESS_SPACE + "|cpu|cuda|opencl] [--capacity BYTES, k/m/g suffixes binary]"
                    + " [--warmups N] [--runs N] FILE...");
            return 2;
        }
        try {
            for (Path file : files) {
                Trace trace = Trace.read(file);
                ReplayResult result = replay(backendName, capacity, trace, warmups, runs);
                System.out.println(result.line());
                System.out.print(result.table());
            }
            return 0;
        } catch (IOException | RuntimeException e) {
            System.err.println("replay failed: " + e);
            return 1;
        }
    }

    private static ReplayResult replay(String backendName, Long capacity, Trace trace, int warmups, int runs) {
        if (backendName.equals(ADDRESS_SPACE)) {
            long bytes = capacity != null ? capacity : DEFAULT_CAPACITY;
            return new TraceReplayer(c -> new AddressSpaceBackend(c), true).measure(trace, bytes, warmups, runs);
        }
        BackendSettings settings = BackendSettings.ofDevice(0);
        ClassLoader loader = ReplayCommand.class.getClassLoader();
        try (ComputeBackend device = BackendSelection.choose(backendName, settings, BackendSelection.providers(loader)).provider().create(settings)) {
            long total = device.memoryInfo().totalBytes() > 0 ? device.memoryInfo().totalBytes() : device.info().deviceTotalBytes();
            long bytes = capacity != null ? capacity : total;
            if (bytes <= 0) {
                throw new IllegalArgumentException(backendName + " does not say how much memory it has; give --capacity");
            }
            System.out.println("# replaying on " + device.info() + " with the pool capped at " + bytes + " bytes");
            return new TraceReplayer(c -> device, false).measure(trace, bytes, warmups, runs);
        }
    }

    private static String value(String[] args, int i) {
        if (i >= args.length) {
            throw new IllegalArgumentException(args[i - 1] + " needs a value");
        }
        return args[i];
    }

    /** Bytes, or with a binary suffix: {@code 80g}, {@code 512m}, {@code 64k}. */
    static long parseBytes(String text) {
        String t = text.strip().toLowerCase(Locale.ROOT);
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
            if (value > 0 && value <= (Long.MAX_VALUE >> shift)) {
                return value << shift;
            }
        } catch (NumberFormatException e) {
            // reported below
        }
        throw new IllegalArgumentException("not a positive size: " + text);
    }
}
