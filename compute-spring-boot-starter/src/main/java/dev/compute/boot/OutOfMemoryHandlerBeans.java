package dev.compute.boot;

import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.OutOfMemoryHandler;
import java.util.List;
import org.springframework.beans.BeansException;
import org.springframework.beans.factory.ObjectProvider;

/**
 * The application's {@link OutOfMemoryHandler} beans, looked up in their {@code @Order} when memory runs out rather
 * than when the manager is built: a handler is most often a cache of buffers made with the manager whose memory it
 * gives back, so it depends on the manager and cannot exist before it. Asks them in turn until one asks for a retry.
 */
final class OutOfMemoryHandlerBeans implements OutOfMemoryHandler {

    private final ObjectProvider<OutOfMemoryHandler> handlers;

    OutOfMemoryHandlerBeans(ObjectProvider<OutOfMemoryHandler> handlers) {
        this.handlers = handlers;
    }

    @Override
    public boolean onOutOfMemory(MemoryLocation location, long requestedBytes, int attempt, DeviceOutOfMemoryException failure) {
        List<OutOfMemoryHandler> each;
        try {
            each = handlers.orderedStream().toList();
        } catch (BeansException e) {
            // the context is shutting down (its handler beans destroyed, none may be made): the allocation fails as
            // out of memory, which is what it is, rather than with the context's refusal
            failure.addSuppressed(e);
            return false;
        }
        for (OutOfMemoryHandler handler : each) {
            if (handler.onOutOfMemory(location, requestedBytes, attempt, failure)) {
                return true;
            }
        }
        return false;
    }

    @Override
    public String toString() {
        return "the application's OutOfMemoryHandler beans";
    }
}
