package dev.compute.memory.testing;

import dev.compute.memory.internal.ManagerLog;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;

/**
 * Keeps what a logger writes from now until {@link #close()}, instead of printing it: for a test that makes the code
 * log on purpose (a warning with its exception, an error), so that a passing run prints no stack trace and the test
 * can check what was said.
 */
public final class LogCapture implements AutoCloseable {

    private final Logger logger;
    private final boolean parentHandlers;
    private final List<LogRecord> records = new CopyOnWriteArrayList<>();
    private final Handler keep = new Handler() {
        @Override
        public void publish(LogRecord record) {
            records.add(record);
        }

        @Override
        public void flush() {}

        @Override
        public void close() {}
    };

    private LogCapture(String name) {
        logger = Logger.getLogger(name);
        parentHandlers = logger.getUseParentHandlers();
        logger.addHandler(keep);
        logger.setUseParentHandlers(false);
    }

    /** The manager's log ({@link ManagerLog#NAME}), which every part of the manager writes to. */
    public static LogCapture managerLog() {
        return new LogCapture(ManagerLog.NAME);
    }

    public static LogCapture of(String loggerName) {
        return new LogCapture(loggerName);
    }

    /** The records at {@code level} or above, in order. */
    public List<LogRecord> atLeast(Level level) {
        return records.stream().filter(r -> r.getLevel().intValue() >= level.intValue()).toList();
    }

    /** The messages at {@code level} or above, in order. */
    public List<String> messages(Level level) {
        return atLeast(level).stream().map(LogRecord::getMessage).toList();
    }

    @Override
    public void close() {
        logger.removeHandler(keep);
        logger.setUseParentHandlers(parentHandlers);
    }
}
