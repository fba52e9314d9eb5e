"""Float-heavy pure-Python loops: the classic n-body simulation.

Usage: python nbody.py [SCALE]   (SCALE=1.0 is about 2-4 s on the reference machine)
"""

import sys

PI = 3.14159265358979323
SOLAR_MASS = 4 * PI * PI
DAYS_PER_YEAR = 365.24


def make_bodies():
    # x, y, z, vx, vy, vz, mass for the Sun and the four gas giants.
    raw = [
        ([0.0, 0.0, 0.0], [0.0, 0.0, 0.0], SOLAR_MASS),
        ([4.84143144246472090e00, -1.16032004402742839e00, -1.03622044471123109e-01],
         [1.66007664274403694e-03, 7.69901118419740425e-03, -6.90460016972063023e-05],
         9.54791938424326609e-04),
        ([8.34336671824457987e00, 4.12479856412430479e00, -4.03523417114321381e-01],
         [-2.76742510726862411e-03, 4.99852801234917238e-03, 2.30417297573763929e-05],
         2.85885980666130812e-04),
        ([1.28943695621391310e01, -1.51111514016986312e01, -2.23307578892655734e-01],
         [2.96460137564761618e-03, 2.37847173959480950e-03, -2.96589568540237556e-05],
         4.36624404335156298e-05),
        ([1.53796971148509165e01, -2.59193146099879641e01, 1.79258772950371181e-01],
         [2.68067772490389322e-03, 1.62824170038242295e-03, -9.51592254519715870e-05],
         5.15138902046611451e-05),
    ]
    bodies = []
    for position, velocity, mass in raw:
        scaled_mass = mass if mass == SOLAR_MASS else mass * SOLAR_MASS
        bodies.append((position, [v * DAYS_PER_YEAR for v in velocity], scaled_mass))
    return bodies


def pairs(bodies):
    return [(bodies[i], bodies[j]) for i in range(len(bodies)) for j in range(i + 1, len(bodies))]


def advance(bodies, body_pairs, dt, steps):
    for _ in range(steps):
        for ([x1, y1, z1], v1, m1), ([x2, y2, z2], v2, m2) in body_pairs:
            dx = x1 - x2
            dy = y1 - y2
            dz = z1 - z2
            mag = dt * ((dx * dx + dy * dy + dz * dz) ** -1.5)
            b1m = m1 * mag
            b2m = m2 * mag
            v1[0] -= dx * b2m
            v1[1] -= dy * b2m
            v1[2] -= dz * b2m
            v2[0] += dx * b1m
            v2[1] += dy * b1m
            v2[2] += dz * b1m
        for r, [vx, vy, vz], _ in bodies:
            r[0] += dt * vx
            r[1] += dt * vy
            r[2] += dt * vz


def energy(bodies, body_pairs):
    e = 0.0
    for ((x1, y1, z1), v1, m1), ((x2, y2, z2), v2, m2) in body_pairs:
        e -= (m1 * m2) / ((x1 - x2) ** 2 + (y1 - y2) ** 2 + (z1 - z2) ** 2) ** 0.5
    for _, [vx, vy, vz], m in bodies:
        e += m * (vx * vx + vy * vy + vz * vz) / 2.0
    return e


def main(scale):
    bodies = make_bodies()
    body_pairs = pairs(bodies)
    before = energy(bodies, body_pairs)
    advance(bodies, body_pairs, 0.01, max(1, int(1_000_000 * scale)))
    after = energy(bodies, body_pairs)
    print(f"nbody: energy {before:.9f} -> {after:.9f}")


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 1.0)
