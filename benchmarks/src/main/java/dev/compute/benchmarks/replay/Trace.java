package dev.compute.benchmarks.replay;

import dev.compute.memory.MemoryLocation;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.AccessDeniedException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import java.util.zip.GZIPInputStream;

/**
 * An allocation trace, parsed once into arrays so that a replay measures the pool, not the parser.
 *
 * <p>Format (gzip'd or plain text): {@code #} comments, then one event a line,
 * <pre>
 * a,&lt;id&gt;,&lt;bytes&gt;,&lt;stream&gt;[,&lt;location&gt;[,&lt;thread&gt;[,&lt;nanos&gt;[,&lt;call site&gt;]]]]   allocates
 * f,&lt;id&gt;[,&lt;thread&gt;[,&lt;nanos&gt;]]                                                  frees
 * </pre>
 * The columns after the stream are optional, and an empty one means unknown; the call site, last, may hold commas.
 * Ids map to dense slots: event {@code i} allocates {@code bytes[i]} into {@code slots[i]}, or frees that slot
 * when {@code bytes[i]} is 0. Allocations never freed stay live. A free of an id that is not live (a block
 * allocated before the recording started) is skipped and counted in {@code skippedFrees}, or refused when
 * reading strictly. The other columns are kept in {@link Columns}, and so are the names of threads that a
 * {@code # thread,<id>,<name>} comment gives (as a recorded trace's header does).
 */
public record Trace(String name, int[] slots, long[] bytes, int slotCount, long livePeak, int skippedFrees, Columns columns) {

    /** A comment that names a thread: {@code # thread,<id>,<name>}. */
    private static final String THREAD_NAME = "# thread,";

    /**
     * What the trace says of each event besides its size: its line in the file and its id; the stream and location
     * of its allocation (for a free, those of the block's allocation); the thread that allocated or freed, and when,
     * in nanoseconds (-1 where the trace does not say). Streams, locations and threads are indexes into their
     * names, in the order first seen; an empty name where the trace does not say. {@code threadLabels}: a thread's
     * name by its column's value, where a comment gives one.
     */
    public record Columns(int[] lines, String[] ids, int[] streams, int[] locations, int[] threads, long[] nanos,
                          List<String> streamNames, List<String> locationNames, List<String> threadNames,
                          Map<String, String> threadLabels) {

        Columns select(int[] events) {
            return new Columns(pick(lines, events), pick(ids, events), pick(streams, events), pick(locations, events),
                    pick(threads, events), pick(nanos, events), streamNames, locationNames, threadNames, threadLabels);
        }

        /** The thread of a column's value as a reader knows it: its id, and its name where the trace gives one. */
        public String threadLabel(String thread) {
            String label = threadLabels.get(thread);
            return label == null ? thread : thread + " (" + label + ")";
        }
    }

    public int events() {
        return slots.length;
    }

    public boolean isAllocation(int event) {
        return bytes[event] > 0;
    }

    /** Whether any event says when it happened. */
    public boolean hasTimes() {
        return Arrays.stream(columns.nanos()).anyMatch(n -> n >= 0);
    }

    /** The locations its events name, in the order first seen; empty where they name none. */
    public List<String> locations() {
        return Arrays.stream(columns.locations()).distinct().mapToObj(columns.locationNames()::get)
                .filter(location -> !location.isEmpty()).toList();
    }

    /** The events at {@code location} alone, their live peak anew; slots stay as they are. */
    public Trace only(String location) {
        int index = columns.locationNames().indexOf(location);
        return selected(IntStream.range(0, events()).filter(i -> columns.locations()[i] == index).toArray());
    }

    /** The first {@code count} events, their live peak anew: a run stopped there. */
    public Trace first(int count) {
        return selected(IntStream.range(0, count).toArray());
    }

    /** The events at indices {@code chosen}, in order, their live peak anew; slots stay as they are. */
    private Trace selected(int[] chosen) {
        int[] chosenSlots = pick(slots, chosen);
        long[] chosenBytes = pick(bytes, chosen);
        return new Trace(name, chosenSlots, chosenBytes, slotCount, livePeak(chosenSlots, chosenBytes, slotCount), skippedFrees,
                columns.select(chosen));
    }

    /**
     * The most bytes live at once that each stream allocated, by stream name, in the order first seen: the trace's
     * stream column kept, as users of RMM's replayer asked.
     */
    public Map<String, Long> livePeakByStream() {
        return livePeakBy(columns.streams(), columns.streamNames());
    }

    /**
     * The most bytes live at once that each thread allocated (whoever freed them), by {@link Columns#threadLabel}, in
     * the order first seen.
     */
    public Map<String, Long> livePeakByThread() {
        return livePeakBy(columns.threads(), columns.threadNames().stream().map(columns::threadLabel).toList());
    }

    private Map<String, Long> livePeakBy(int[] column, List<String> names) {
        long[] live = new long[names.size()];
        long[] peak = new long[names.size()];
        int[] owner = new int[slotCount];
        long[] size = new long[slotCount];
        for (int i = 0; i < events(); i++) {
            int slot = slots[i];
            if (isAllocation(i)) {
                owner[slot] = column[i];
                size[slot] = bytes[i];
                live[column[i]] += bytes[i];
                peak[column[i]] = Math.max(peak[column[i]], live[column[i]]);
            } else {
                live[owner[slot]] -= size[slot];
            }
        }
        Map<String, Long> peaks = new LinkedHashMap<>();
        for (int n = 0; n < names.size(); n++) {
            if (peak[n] > 0) {
                peaks.put(names.get(n), peak[n]);
            }
        }
        return peaks;
    }

    /** Where event {@code i} is in the file and what it says, for a message that names it. */
    public String describe(int event) {
        String what = isAllocation(event) ? "allocation of " + bytes[event] + " bytes, id " + columns.ids()[event]
                : "free of id " + columns.ids()[event];
        String stream = columns.streamNames().get(columns.streams()[event]);
        String thread = columns.threadNames().get(columns.threads()[event]);
        return name + " line " + columns.lines()[event] + ", event " + (event + 1) + " (" + what
                + (stream.isEmpty() ? "" : ", stream " + stream) + (thread.isEmpty() ? "" : ", thread " + columns.threadLabel(thread)) + ")";
    }

    public static Trace read(Path file) throws IOException {
        return read(file, false);
    }

    /**
     * {@code strict}: a free of an id that is not live is refused rather than skipped. A file that cannot be read fails
     * naming it (and the line, where it broke off in the middle), as a malformed line does.
     */
    public static Trace read(Path file, boolean strict) throws IOException {
        try (InputStream in = open(file)) {
            InputStream text;
            try {
                text = file.toString().endsWith(".gz") ? new GZIPInputStream(in) : in;
            } catch (IOException e) {
                throw new IOException(file + " cannot be read: " + e, e);
            }
            return read(file.getFileName().toString(), text, strict);
        }
    }

    /** A trace file that is not there, not a file, or not readable: its message says which, naming it. */
    static final class Unreadable extends IOException {
        Unreadable(String message, Throwable cause) {
            super(message, cause);
        }
    }

    /** Opens a trace file, failing with {@link Unreadable} where it is missing, a directory or not readable. */
    static InputStream open(Path file) throws IOException {
        if (Files.isDirectory(file)) {
            throw new Unreadable(file + " is a directory, not a trace", null);
        }
        try {
            return Files.newInputStream(file);
        } catch (NoSuchFileException e) {
            throw new Unreadable(file + ": no such file", e);
        } catch (AccessDeniedException e) {
            throw new Unreadable(file + ": permission denied", e);
        }
    }

    public static Trace read(String name, InputStream in) throws IOException {
        return read(name, in, false);
    }

    public static Trace read(String name, InputStream in, boolean strict) throws IOException {
        Parser parser = new Parser(name, strict);
        BufferedReader reader = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8));
        int lineNumber = 0;
        for (String line; (line = readLine(reader, name, lineNumber + 1)) != null; ) {
            lineNumber++;
            line = line.strip();
            if (line.startsWith(THREAD_NAME)) {
                parser.threadName(line.substring(THREAD_NAME.length()));
            } else if (!line.isEmpty() && !line.startsWith("#")) {
                parser.event(lineNumber, line);
            }
        }
        return parser.trace();
    }

    /** The next line; a failure to read it (a gzip stream cut short, say) names the trace and the line. */
    private static String readLine(BufferedReader reader, String name, int lineNumber) throws IOException {
        try {
            return reader.readLine();
        } catch (IOException e) {
            throw new IOException(name + " line " + lineNumber + " cannot be read: " + e, e);
        }
    }

    /** The arrays a trace is made of, grown as lines come; {@link TraceScaling} checks each line it scales with one too. */
    static final class Parser {
        private static final int QUOTED = 200;
        private static final Set<String> LOCATIONS = Arrays.stream(MemoryLocation.values()).map(Enum::name).collect(Collectors.toUnmodifiableSet());
        private final String name;
        private final boolean strict;
        private int[] slots = new int[1024];
        private long[] bytes = new long[1024];
        private int[] lines = new int[1024];
        private String[] ids = new String[1024];
        private int[] streams = new int[1024];
        private int[] locations = new int[1024];
        private int[] threads = new int[1024];
        private long[] nanos = new long[1024];
        private int events;
        private final Map<String, Integer> slotOfId = new HashMap<>();
        private final Map<Integer, Long> liveSize = new HashMap<>();
        private final Map<Integer, Integer> streamOfSlot = new HashMap<>();
        private final Map<Integer, Integer> locationOfSlot = new HashMap<>();
        // slots freed by earlier frees, reused so that a replay's array of live blocks stays as small as the live set
        private final ArrayDeque<Integer> freeSlots = new ArrayDeque<>();
        private final Names streamNames = new Names();
        private final Names locationNames = new Names();
        private final Names threadNames = new Names();
        private final Map<String, String> threadLabels = new HashMap<>();
        private int slotCount;
        private long live;
        private long livePeak;
        private int skippedFrees;

        Parser(String name, boolean strict) {
            this.name = name;
            this.strict = strict;
        }

        void threadName(String idAndName) {
            int comma = idAndName.indexOf(',');
            if (comma > 0) {
                threadLabels.put(idAndName.substring(0, comma).strip(), idAndName.substring(comma + 1).strip());
            }
        }

        void event(int lineNumber, String line) {
            String[] fields = line.split(",", 8);
            if (fields.length < 2) {
                throw malformed(lineNumber, line, "an event is a,<id>,<bytes>,<stream>... or f,<id>...");
            }
            if (events == slots.length) {
                grow();
            }
            switch (fields[0]) {
                case "a" -> {
                    if (fields.length < 4) {
                        throw malformed(lineNumber, line, "an allocation is a,<id>,<bytes>,<stream>[,<location>,<thread>,<nanos>,<call site>]");
                    }
                    long size = parseSize(lineNumber, line, fields[2]);
                    String location = location(lineNumber, line, field(fields, 4));
                    if (slotOfId.containsKey(fields[1])) {
                        throw malformed(lineNumber, line, "id " + fields[1] + " is live already");
                    }
                    int slot = freeSlots.isEmpty() ? slotCount++ : freeSlots.pop();
                    slotOfId.put(fields[1], slot);
                    liveSize.put(slot, size);
                    streamOfSlot.put(slot, streamNames.indexOf(fields[3]));
                    locationOfSlot.put(slot, locationNames.indexOf(location));
                    add(lineNumber, fields[1], slot, size, streamOfSlot.get(slot), locationOfSlot.get(slot), field(fields, 5),
                            nanos(lineNumber, line, field(fields, 6)));
                    live += size;
                    livePeak = Math.max(livePeak, live);
                }
                case "f" -> {
                    if (fields.length > 4) {
                        throw malformed(lineNumber, line, "a free is f,<id>[,<thread>,<nanos>]");
                    }
                    Integer slot = slotOfId.remove(fields[1]);
                    if (slot == null) {
                        if (strict) {
                            throw malformed(lineNumber, line, "id " + fields[1] + " is not live (a block allocated before the recording"
                                    + " started, or a free without its allocation); replay without --strict to skip such frees");
                        }
                        skippedFrees++;
                        return;
                    }
                    live -= liveSize.remove(slot);
                    freeSlots.push(slot);
                    add(lineNumber, fields[1], slot, 0, streamOfSlot.remove(slot), locationOfSlot.remove(slot), field(fields, 2),
                            nanos(lineNumber, line, field(fields, 3)));
                }
                default -> throw malformed(lineNumber, line, "an event starts with a or f");
            }
        }

        private void add(int lineNumber, String id, int slot, long size, int stream, int location, String thread, long at) {
            slots[events] = slot;
            bytes[events] = size;
            lines[events] = lineNumber;
            ids[events] = id;
            streams[events] = stream;
            locations[events] = location;
            threads[events] = threadNames.indexOf(thread);
            nanos[events] = at;
            events++;
        }

        private void grow() {
            int length = events * 2;
            slots = Arrays.copyOf(slots, length);
            bytes = Arrays.copyOf(bytes, length);
            lines = Arrays.copyOf(lines, length);
            ids = Arrays.copyOf(ids, length);
            streams = Arrays.copyOf(streams, length);
            locations = Arrays.copyOf(locations, length);
            threads = Arrays.copyOf(threads, length);
            nanos = Arrays.copyOf(nanos, length);
        }

        Trace trace() {
            Columns columns = new Columns(Arrays.copyOf(lines, events), Arrays.copyOf(ids, events), Arrays.copyOf(streams, events),
                    Arrays.copyOf(locations, events), Arrays.copyOf(threads, events), Arrays.copyOf(nanos, events),
                    streamNames.names(), locationNames.names(), threadNames.names(), Map.copyOf(threadLabels));
            return new Trace(name, Arrays.copyOf(slots, events), Arrays.copyOf(bytes, events), slotCount, livePeak, skippedFrees, columns);
        }

        private static String field(String[] fields, int index) {
            return index < fields.length ? fields[index].strip() : "";
        }

        private long parseSize(int lineNumber, String line, String field) {
            try {
                long size = Long.parseLong(field);
                if (size > 0) {
                    return size;
                }
            } catch (NumberFormatException e) {
                // reported below
            }
            throw malformed(lineNumber, line, "bytes must be a positive number");
        }

        /** A {@link MemoryLocation}'s name, in any case; empty where the trace does not say. */
        private String location(int lineNumber, String line, String field) {
            if (field.isEmpty()) {
                return field;
            }
            String name = field.toUpperCase(Locale.ROOT);
            if (!LOCATIONS.contains(name)) {
                throw malformed(lineNumber, line, "the location must be one of " + Arrays.toString(MemoryLocation.values()) + ", or empty");
            }
            return name;
        }

        private long nanos(int lineNumber, String line, String field) {
            if (field.isEmpty()) {
                return -1;
            }
            try {
                long at = Long.parseLong(field);
                if (at >= 0) {
                    return at;
                }
            } catch (NumberFormatException e) {
                // reported below
            }
            throw malformed(lineNumber, line, "nanos must be a number of 0 or more, or empty");
        }

        /** The line quoted as far as {@link #QUOTED} characters: a file that is no trace may have a line of megabytes. */
        private IllegalArgumentException malformed(int lineNumber, String line, String why) {
            String quoted = line.length() <= QUOTED ? line : line.substring(0, QUOTED) + "... (" + line.length() + " characters)";
            return new IllegalArgumentException(name + " line " + lineNumber + " (" + quoted + "): " + why);
        }
    }

    /** Names of a column, each given an index the first time it is seen. */
    private static final class Names {
        private final Map<String, Integer> index = new HashMap<>();
        private final List<String> names = new ArrayList<>();

        int indexOf(String name) {
            return index.computeIfAbsent(name, added -> {
                names.add(added);
                return names.size() - 1;
            });
        }

        List<String> names() {
            return List.copyOf(names);
        }
    }

    private static long livePeak(int[] slots, long[] bytes, int slotCount) {
        long[] size = new long[slotCount];
        long live = 0;
        long peak = 0;
        for (int i = 0; i < slots.length; i++) {
            if (bytes[i] > 0) {
                size[slots[i]] = bytes[i];
                live += bytes[i];
                peak = Math.max(peak, live);
            } else {
                live -= size[slots[i]];
            }
        }
        return peak;
    }

    private static int[] pick(int[] column, int[] events) {
        return Arrays.stream(events).map(i -> column[i]).toArray();
    }

    private static long[] pick(long[] column, int[] events) {
        return Arrays.stream(events).mapToLong(i -> column[i]).toArray();
    }

    private static String[] pick(String[] column, int[] events) {
        return Arrays.stream(events).mapToObj(i -> column[i]).toArray(String[]::new);
    }
}
