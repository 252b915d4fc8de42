package dev.compute.sample;

import dev.compute.memory.DataType;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Function;
import java.util.regex.Pattern;
import org.jspecify.annotations.Nullable;
import org.springframework.beans.factory.DisposableBean;
import org.springframework.stereotype.Service;

/**
 * Named FLOAT64 vectors kept in compute memory between requests, at the manager's default location (the GPU's
 * memory on an accelerator). Each buffer is used under its own lock, so a delete never closes a buffer under a
 * running operation. How many vectors and bytes it keeps is limited ({@link VectorStoreProperties}): a vector past
 * the limits, counting the room that stores under way hold, is refused before its memory is allocated, and checked
 * again, under the lock that guards the count, before it is kept, so concurrent stores can neither keep nor allocate
 * past the limits together.
 */
@Service
public class VectorStore implements DisposableBean {

    /** Bounds a request's size: 16 Mi elements, 128 MiB of FLOAT64. */
    public static final int MAX_LENGTH = 1 << 24;
    private static final int MAX_NAME_LENGTH = 64;
    // not "." or "..": clients drop such a path segment from a URL (RFC 3986), so no curl could read or delete it
    private static final Pattern NAME = Pattern.compile("(?!\\.\\.?$)[A-Za-z0-9_.-]{1," + MAX_NAME_LENGTH + "}");

    public record VectorInfo(String name, long length, String location, long sizeBytes) {}

    public record StoredVector(VectorInfo info, double[] values) {}

    /** What a {@link #put} stored, and whether the name was new. */
    public record Stored(VectorInfo info, boolean created) {}

    private final UnifiedMemoryManager manager;
    private final VectorStoreProperties limits;
    // vectors and storedBytes change together under this lock; vectors is read without it
    private final Object changes = new Object();
    private final Map<String, UnifiedBuffer> vectors = new ConcurrentHashMap<>();
    private long storedBytes;
    // the room puts under way hold between their first check and keeping their vector (or failing), so that
    // concurrent puts cannot allocate past the limits together; guarded by changes, as storedBytes
    private long reservedBytes;
    private int reservedVectors;
    // set by destroy(), under changes: a put still under way then keeps nothing, which the manager's close would report
    private boolean closed;

    public VectorStore(UnifiedMemoryManager manager, VectorStoreProperties limits) {
        this.manager = manager;
        this.limits = limits;
    }

    /**
     * Stores {@code values} under {@code name}, replacing (and freeing) what was there. Answers what it stored, whether
     * the name was new, from its own buffer: a concurrent delete or replace of the name changes what is stored next,
     * not what this call did.
     */
    public Stored put(String name, double @Nullable [] values) {
        checkName(name);
        checkValues("values", values);
        long bytes = (long) values.length * Double.BYTES;
        Reservation reservation;
        synchronized (changes) {
            checkRoom(name, bytes);
            reservation = new Reservation(name, bytes);
        }
        UnifiedBuffer buffer = null;
        UnifiedBuffer previous;
        try {
            buffer = manager.allocate(DataType.FLOAT64, values.length);
            buffer.copyFrom(values);
            synchronized (changes) {
                reservation.release();
                checkRoom(name, bytes);
                previous = vectors.put(name, buffer);
                storedBytes += bytes - (previous == null ? 0 : previous.byteSize());
            }
        } catch (RuntimeException e) {
            if (buffer != null) {
                buffer.close();
            }
            throw e;
        } finally {
            synchronized (changes) {
                reservation.release();
            }
        }
        if (previous != null) {
            synchronized (previous) {
                previous.close();
            }
        }
        return new Stored(info(name, buffer), previous == null);
    }

    /** The vector's figures and its values, read from one buffer, so that a concurrent replace cannot mix two. */
    public StoredVector get(String name) {
        return locked(name, buffer -> new StoredVector(info(name, buffer), read(buffer)));
    }

    private static double[] read(UnifiedBuffer buffer) {
        double[] values = new double[Math.toIntExact(buffer.elementCount())];
        buffer.copyTo(values);
        return values;
    }

    public boolean delete(String name) {
        UnifiedBuffer buffer;
        synchronized (changes) {
            buffer = vectors.remove(name);
            if (buffer == null) {
                return false;
            }
            storedBytes -= buffer.byteSize();
        }
        synchronized (buffer) {
            buffer.close();
        }
        return true;
    }

    public List<VectorInfo> list() {
        return vectors.entrySet().stream().sorted(Map.Entry.comparingByKey())
                .map(e -> info(e.getKey(), e.getValue())).toList();
    }

    public VectorInfo info(String name) {
        return info(name, find(name));
    }

    /** {@code name = alpha * name}. */
    public VectorInfo scale(String name, double alpha) {
        checkFinite("alpha", alpha);
        return locked(name, buffer -> {
            double[] values = read(buffer);
            for (int i = 0; i < values.length; i++) {
                checkStoredResult("scaling '" + name + "' by " + alpha, i, alpha * values[i]);
            }
            manager.ops().scale(buffer, alpha);
            return info(name, buffer);
        });
    }

    /** {@code y = alpha * x + y}, both stored vectors of the same length. */
    public VectorInfo axpy(double alpha, String x, String y) {
        checkFinite("alpha", alpha);
        checkName(x);
        while (true) {
            UnifiedBuffer xs = find(x);
            UnifiedBuffer ys = find(y);
            if (xs.elementCount() != ys.elementCount()) {
                throw new IllegalArgumentException("vectors '" + x + "' (" + xs.elementCount() + " elements) and '" + y + "' ("
                        + ys.elementCount() + " elements) differ in length");
            }
            // Both locks, always in name order, so two crossed axpy calls cannot deadlock.
            UnifiedBuffer first = x.compareTo(y) <= 0 ? xs : ys;
            UnifiedBuffer second = first == xs ? ys : xs;
            synchronized (first) {
                synchronized (second) {
                    if (!xs.isClosed() && !ys.isClosed()) {
                        double[] xv = read(xs);
                        double[] yv = read(ys);
                        String operation = "'" + y + "' + " + alpha + " * '" + x + "'";
                        for (int i = 0; i < yv.length; i++) {
                            // a device may fuse the multiply-add or not: neither may overflow
                            checkStoredResult(operation, i, alpha * xv[i] + yv[i]);
                            checkStoredResult(operation, i, Math.fma(alpha, xv[i], yv[i]));
                        }
                        manager.ops().axpy(alpha, xs, ys);
                        return info(y, ys);
                    }
                }
            }
            // one was replaced (or deleted) after we found it: look both up again, as locked(...) does
        }
    }

    public double sum(String name) {
        return locked(name, buffer -> checkResult("the sum of '" + name + "'", manager.ops().sum(buffer)));
    }

    /** Refuses a vector of {@code bytes} under {@code name} that would take the store past its limits, or any once closed; holds {@link #changes}. */
    private void checkRoom(String name, long bytes) {
        if (closed) {
            throw new StoreClosedException("the service is shutting down and keeps no more vectors; store '" + name + "' again once it is back");
        }
        UnifiedBuffer replaced = vectors.get(name);
        if (replaced == null && vectors.size() + reservedVectors >= limits.maxCount()) {
            throw new VectorLimitExceededException("the service keeps at most " + limits.maxCount() + " vectors "
                    + "(sample.vectors.max-count) and has as many" + (reservedVectors > 0 ? " (" + reservedVectors + " being stored)" : "")
                    + "; delete one (DELETE /api/vectors/{name}) to store '" + name + "'");
        }
        long after = storedBytes + reservedBytes - (replaced == null ? 0 : replaced.byteSize()) + bytes;
        if (after > limits.maxBytes().toBytes()) {
            throw new VectorLimitExceededException("'" + name + "' (" + bytes + " bytes) does not fit: the service keeps at most "
                    + limits.maxBytes().toBytes() + " bytes of vectors (sample.vectors.max-bytes) and holds " + storedBytes
                    + (reservedBytes > 0 ? " (and " + reservedBytes + " being stored)" : "")
                    + "; delete some (DELETE /api/vectors/{name}) or store a shorter one");
        }
    }

    /**
     * The room one put under way holds, from its first check until it keeps its vector or fails: a new name's place and
     * the bytes it adds (a replacement only what it adds to the vector it replaces). Made and released under {@link #changes}.
     */
    private final class Reservation {
        private int places;
        private long bytes;

        Reservation(String name, long bytes) {
            UnifiedBuffer replaced = vectors.get(name);
            this.places = replaced == null ? 1 : 0;
            this.bytes = Math.max(0, bytes - (replaced == null ? 0 : replaced.byteSize()));
            reservedVectors += places;
            reservedBytes += this.bytes;
        }

        /** Gives the room back; a second call does nothing. */
        void release() {
            reservedVectors -= places;
            reservedBytes -= bytes;
            places = 0;
            bytes = 0;
        }
    }

    /**
     * Runs {@code action} on the vector's buffer under the buffer's lock. A buffer closed after we found it was
     * replaced or deleted: a delete or replace takes it out of {@link #vectors} before it closes it, so looking the
     * name up again finds the vector in its new buffer, or that it is gone (404), never a vector missing that is there.
     */
    private <T> T locked(String name, Function<UnifiedBuffer, T> action) {
        while (true) {
            UnifiedBuffer buffer = find(name);
            synchronized (buffer) {
                if (!buffer.isClosed()) {
                    return action.apply(buffer);
                }
            }
        }
    }

    // package-private for the tests, which hold a buffer's lock to order a read and a replace
    UnifiedBuffer find(String name) {
        UnifiedBuffer buffer = vectors.get(name);
        if (buffer == null) {
            throw new VectorNotFoundException(name);
        }
        return buffer;
    }

    private static VectorInfo info(String name, UnifiedBuffer buffer) {
        return new VectorInfo(name, buffer.elementCount(), buffer.location().name(), buffer.byteSize());
    }

    static void checkName(String name) {
        if (!NAME.matcher(name).matches()) {
            throw new IllegalArgumentException("vector name " + quoted(name) + " is not allowed: use 1 to " + MAX_NAME_LENGTH
                    + " letters, digits, '_', '.' or '-', other than '.' and '..'");
        }
    }

    /** A name as a message quotes it: whole, or its start and its length where it is longer than a name may be. */
    private static String quoted(String name) {
        return name.length() <= MAX_NAME_LENGTH ? "'" + name + "'"
                : "'" + name.substring(0, MAX_NAME_LENGTH) + "...' (" + name.length() + " characters)";
    }

    static void checkFinite(String field, double value) {
        if (!Double.isFinite(value)) {
            throw new IllegalArgumentException("'" + field + "' must be a finite number, not " + value);
        }
    }

    static void checkValues(String field, double @Nullable [] values) {
        if (values == null) {
            throw new IllegalArgumentException("'" + field + "' is required: an array of numbers");
        }
        if (values.length == 0 || values.length > MAX_LENGTH) {
            throw new IllegalArgumentException("'" + field + "' must have 1 to " + MAX_LENGTH + " elements, not " + values.length);
        }
        for (int i = 0; i < values.length; i++) {
            if (!Double.isFinite(values[i])) {
                throw new IllegalArgumentException("'" + field + "' must hold finite numbers; element " + i + " is " + values[i]);
            }
        }
    }

    /**
     * Refuses a result that is no FLOAT64 number (an overflow, or infinity times 0): JSON has no number for it and the
     * service takes none, so it is a 400, not a string {@code "Infinity"} where a number belongs.
     */
    static double checkResult(String what, double result) {
        if (!Double.isFinite(result)) {
            throw new IllegalArgumentException(what + " overflows FLOAT64 (" + result + "); use smaller numbers");
        }
        return result;
    }

    static double[] checkResult(String what, double[] result) {
        for (int i = 0; i < result.length; i++) {
            if (!Double.isFinite(result[i])) {
                throw new IllegalArgumentException(what + " overflows FLOAT64: element " + i + " of the result is " + result[i]
                        + "; use smaller numbers");
            }
        }
        return result;
    }

    // before the op, on the host (IEEE arithmetic, as every backend's): a stored vector is left as it was
    private static void checkStoredResult(String operation, int index, double result) {
        if (!Double.isFinite(result)) {
            throw new IllegalArgumentException(operation + " overflows FLOAT64 at element " + index
                    + "; the vector is unchanged, and holds finite numbers only");
        }
    }

    /** Frees every stored vector before the manager closes, and keeps none a put still under way brings, so none is reported as a leak. */
    @Override
    public void destroy() {
        synchronized (changes) {
            closed = true;
        }
        vectors.keySet().forEach(this::delete);
    }

    public static final class VectorNotFoundException extends RuntimeException {
        public VectorNotFoundException(String name) {
            super("no vector named " + quoted(name) + "; GET /api/vectors lists those stored");
        }
    }

    /** The store closed with its context (a put that was still under way with the server's shutdown). */
    public static final class StoreClosedException extends RuntimeException {
        public StoreClosedException(String message) {
            super(message);
        }
    }

    /** Storing the vector would take the store past {@code sample.vectors.max-count} or {@code max-bytes}. */
    public static final class VectorLimitExceededException extends RuntimeException {
        public VectorLimitExceededException(String message) {
            super(message);
        }
    }
}
