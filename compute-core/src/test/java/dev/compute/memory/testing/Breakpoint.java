package dev.compute.memory.testing;

import com.sun.jdi.Bootstrap;
import com.sun.jdi.Method;
import com.sun.jdi.ReferenceType;
import com.sun.jdi.ThreadReference;
import com.sun.jdi.VMDisconnectedException;
import com.sun.jdi.VirtualMachine;
import com.sun.jdi.connect.AttachingConnector;
import com.sun.jdi.connect.Connector;
import com.sun.jdi.connect.IllegalConnectorArgumentsException;
import com.sun.jdi.event.BreakpointEvent;
import com.sun.jdi.event.Event;
import com.sun.jdi.event.EventSet;
import com.sun.jdi.request.BreakpointRequest;
import com.sun.jdi.request.EventRequest;
import java.io.IOException;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.jspecify.annotations.Nullable;

/**
 * Holds one thread at the start of a method, as a debugger does, so that a test can act while the thread is inside a
 * window no hook reaches (past a check, before the native call it guards): the JVM debugs itself over JDWP, and only the
 * named thread stops. Works in a JVM started by {@link ChildJvm#runDebuggable}; every other thread runs on.
 */
public final class Breakpoint implements AutoCloseable {

    private final VirtualMachine vm;
    private final String threadName;
    private final CountDownLatch hit = new CountDownLatch(1);
    private volatile ThreadReference held;

    private Breakpoint(VirtualMachine vm, String threadName) {
        this.vm = vm;
        this.threadName = threadName;
    }

    /**
     * A breakpoint at the {@code nth} entry (from 1) into {@code method} of {@code type} by the thread named
     * {@code threadName}; other threads entering it go on at once. {@code type} must have one method of that name.
     */
    public static Breakpoint at(Class<?> type, String method, int nth, String threadName) throws IOException {
        VirtualMachine vm = attachToThisJvm();
        List<ReferenceType> loaded = vm.classesByName(type.getName());
        // its own only: the visible methods JDI lists include Object's constructor beside the type's
        List<Method> methods = loaded.getFirst().methodsByName(method).stream().filter(m -> m.declaringType().equals(loaded.getFirst())).toList();
        if (methods.size() != 1) {
            vm.dispose();
            throw new IllegalArgumentException(type.getName() + " has " + methods.size() + " methods named " + method);
        }
        Breakpoint breakpoint = new Breakpoint(vm, threadName);
        BreakpointRequest request = vm.eventRequestManager().createBreakpointRequest(methods.getFirst().location());
        request.setSuspendPolicy(EventRequest.SUSPEND_EVENT_THREAD);
        request.enable();
        Thread events = new Thread(() -> breakpoint.handleEvents(nth), "breakpoint-events");
        events.setDaemon(true);
        events.start();
        return breakpoint;
    }

    private static VirtualMachine attachToThisJvm() throws IOException {
        String port = listeningPort();
        AttachingConnector socket = Bootstrap.virtualMachineManager().attachingConnectors().stream()
                .filter(connector -> connector.name().equals("com.sun.jdi.SocketAttach")).findFirst().orElseThrow();
        Map<String, Connector.Argument> arguments = socket.defaultArguments();
        arguments.get("hostname").setValue("127.0.0.1");
        arguments.get("port").setValue(port);
        try {
            return socket.attach(arguments);
        } catch (IllegalConnectorArgumentsException e) {
            throw new IllegalStateException(e);
        }
    }

    /**
     * The port this JVM's JDWP agent listens on. The agent clears its address while a debugger is attached and listens
     * again, on a fresh port, once it detaches (an earlier breakpoint's close): waits, bounded, until it does.
     */
    private static String listeningPort() {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (true) {
            String listening = listenerAddress();
            if (listening == null) {
                throw new IllegalStateException("this JVM has no JDWP agent: run it with ChildJvm.runDebuggable");
            }
            String port = listening.substring(listening.lastIndexOf(':') + 1);
            if (!port.isEmpty() && port.chars().allMatch(Character::isDigit)) {
                return port;
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("this JVM's JDWP agent did not listen again within 30 s: '" + listening + "'");
            }
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(5));
        }
    }

    /** Where this JVM's JDWP agent listens ("dt_socket:PORT"), from the agent's properties; null without an agent. */
    private static @Nullable String listenerAddress() {
        try {
            Properties agent = (Properties) Class.forName("jdk.internal.vm.VMSupport").getMethod("getAgentProperties").invoke(null);
            return agent.getProperty("sun.jdwp.listenerAddress");
        } catch (ReflectiveOperationException | RuntimeException e) {
            throw new IllegalStateException("this JVM's agent properties cannot be read: run it with ChildJvm.runDebuggable", e);
        }
    }

    private void handleEvents(int nth) {
        int entries = 0;
        try {
            while (true) {
                EventSet events = vm.eventQueue().remove();
                boolean hold = false;
                for (Event event : events) {
                    if (event instanceof BreakpointEvent entry && entry.thread().name().equals(threadName) && held == null && ++entries == nth) {
                        held = entry.thread();
                        hold = true;
                    }
                }
                if (hold) {
                    hit.countDown();
                } else {
                    events.resume();
                }
            }
        } catch (VMDisconnectedException | InterruptedException e) {
            // closed
        }
    }

    /** Waits until the thread is held at the breakpoint; fails after {@code seconds}. */
    public void awaitHit(long seconds) throws InterruptedException {
        if (!hit.await(seconds, TimeUnit.SECONDS)) {
            throw new AssertionError("thread '" + threadName + "' did not reach the breakpoint within " + seconds + " s");
        }
    }

    /** Lets the held thread go on. */
    public void release() {
        ThreadReference thread = held;
        if (thread != null) {
            thread.resume();
        }
    }

    /** Lets the held thread go on, if it still is, and stops debugging this JVM. */
    @Override
    public void close() {
        release();
        vm.dispose();
    }
}
