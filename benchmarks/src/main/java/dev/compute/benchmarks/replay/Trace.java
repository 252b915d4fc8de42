package dev.compute.benchmarks.replay;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.zip.GZIPInputStream;

/**
 * An allocation trace, parsed once into arrays so that a replay measures the pool, not the parser. Format
 * (gzip'd or plain text): {@code #} comments, {@code a,<id>,<bytes>,<stream>} allocates, {@code f,<id>}
 * frees. Ids are mapped to dense slots; event {@code i} allocates {@code bytes[i]} into {@code slots[i]}, or
 * frees that slot when {@code bytes[i]} is 0. Allocations never freed stay live.
 */
public record Trace(String name, int[] slots, long[] bytes, int slotCount, long livePeak) {

    public int events() {
        return slots.length;
    }

    public boolean isAllocation(int event) {
        return bytes[event] > 0;
    }

    public static Trace read(Path file) throws IOException {
        try (InputStream in = Files.newInputStream(file)) {
            return read(file.getFileName().toString(), file.toString().endsWith(".gz") ? new GZIPInputStream(in) : in);
        }
    }

    public static Trace read(String name, InputStream in) throws IOException {
        BufferedReader reader = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8));
        int[] slots = new int[1024];
        long[] bytes = new long[1024];
        int events = 0;
        Map<String, Integer> slotOfId = new HashMap<>();
        Map<Integer, Long> liveSize = new HashMap<>();
        // slots freed by earlier frees, reused so that a replay's array of live blocks stays as small as the live set
        ArrayDeque<Integer> freeSlots = new ArrayDeque<>();
        int slotCount = 0;
        long live = 0;
        long livePeak = 0;
        int lineNumber = 0;
        for (String line; (line = reader.readLine()) != null; ) {
            lineNumber++;
            line = line.strip();
            if (line.isEmpty() || line.startsWith("#")) {
                continue;
            }
            String[] fields = line.split(",");
            if (events == slots.length) {
                slots = Arrays.copyOf(slots, events * 2);
                bytes = Arrays.copyOf(bytes, events * 2);
            }
            switch (fields[0]) {
                case "a" -> {
                    if (fields.length != 4) {
                        throw malformed(name, lineNumber, line, "an allocation is a,<id>,<bytes>,<stream>");
                    }
                    long size = parseSize(name, lineNumber, line, fields[2]);
                    if (slotOfId.containsKey(fields[1])) {
                        throw malformed(name, lineNumber, line, "id " + fields[1] + " is live already");
                    }
                    int slot = freeSlots.isEmpty() ? slotCount++ : freeSlots.pop();
                    slotOfId.put(fields[1], slot);
                    liveSize.put(slot, size);
                    slots[events] = slot;
                    bytes[events] = size;
                    live += size;
                    livePeak = Math.max(livePeak, live);
                }
                case "f" -> {
                    if (fields.length != 2) {
                        throw malformed(name, lineNumber, line, "a free is f,<id>");
                    }
                    Integer slot = slotOfId.remove(fields[1]);
                    if (slot == null) {
                        throw malformed(name, lineNumber, line, "id " + fields[1] + " is not live");
                    }
                    live -= liveSize.remove(slot);
                    freeSlots.push(slot);
                    slots[events] = slot;
                    bytes[events] = 0;
                }
                default -> throw malformed(name, lineNumber, line, "an event starts with a or f");
            }
            events++;
        }
        return new Trace(name, Arrays.copyOf(slots, events), Arrays.copyOf(bytes, events), slotCount, livePeak);
    }

    private static long parseSize(String name, int lineNumber, String line, String field) {
        try {
            long size = Long.parseLong(field);
            if (size > 0) {
                return size;
            }
        } catch (NumberFormatException e) {
            // reported below
        }
        throw malformed(name, lineNumber, line, "bytes must be a positive number");
    }

    private static IllegalArgumentException malformed(String name, int lineNumber, String line, String why) {
        return new IllegalArgumentException(name + " line " + lineNumber + " (" + line + "): " + why);
    }
}
