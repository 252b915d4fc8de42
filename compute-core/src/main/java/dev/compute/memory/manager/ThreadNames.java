package dev.compute.memory.manager;

import java.util.List;

/** Threads named in a warning: thousands may hold views (virtual threads parked in requests), so some of them and a count. */
final class ThreadNames {

    private ThreadNames() {}

    /** {@code threads} joined, or, past {@code most} of them, how many and the first {@code most}. */
    static String some(List<String> threads, int most) {
        if (threads.size() <= most) {
            return String.join(", ", threads);
        }
        return threads.size() + " threads (" + String.join(", ", threads.subList(0, most)) + " and " + (threads.size() - most) + " more)";
    }
}
